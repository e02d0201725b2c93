ALTER TABLE "runs" ADD COLUMN "images" jsonb;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "forked_from" jsonb;