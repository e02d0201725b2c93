ALTER TABLE "hooks" ADD COLUMN "output_schema" jsonb;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "output_schema" jsonb;