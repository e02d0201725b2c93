ALTER TABLE "runs" DROP COLUMN "error";--> statement-breakpoint
ALTER TABLE "runs" DROP COLUMN "result";