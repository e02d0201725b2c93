ALTER TABLE "hooks" ADD COLUMN "mcp_servers" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "mcp_servers" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "max_turns" integer;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "max_budget_usd" double precision;