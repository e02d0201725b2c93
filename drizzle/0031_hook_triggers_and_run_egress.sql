ALTER TABLE "hooks" ADD COLUMN "triggers" jsonb;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "trusted" jsonb;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "fork" jsonb;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "egress" jsonb;