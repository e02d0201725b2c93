ALTER TABLE "api_keys" ADD COLUMN "tool_rules" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "tool_rules" jsonb DEFAULT '[]'::jsonb NOT NULL;