ALTER TABLE "hooks" ADD COLUMN "checkout" text;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "checkout" jsonb;