ALTER TABLE "api_keys" ADD COLUMN "permission_modes" jsonb;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "work_roots" jsonb;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "max_budget_usd" double precision;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "worktrees" boolean DEFAULT true NOT NULL;