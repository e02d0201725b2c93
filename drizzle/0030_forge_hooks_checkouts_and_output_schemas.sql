ALTER TABLE "hooks" ADD COLUMN "checkout" text;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "output_schema" json;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "forge" text;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "forge_api_url" text;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "forge_token" text;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "output_schema" json;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "checkout" jsonb;