ALTER TABLE "runs" ADD COLUMN "handover" jsonb;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "pinned_host" text;--> statement-breakpoint
ALTER TABLE "worktrees" ADD COLUMN "host" text;--> statement-breakpoint
CREATE INDEX "runs_unowned_queued_idx" ON "runs" USING btree ("created_at","id") WHERE "runs"."status" = 'queued' and "runs"."instance_id" is null;