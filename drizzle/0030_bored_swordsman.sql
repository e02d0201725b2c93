ALTER TABLE "hooks" ADD COLUMN "output_schema" json;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "output_schema" json;