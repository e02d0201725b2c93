ALTER TABLE "runs" ADD COLUMN "agent" text DEFAULT 'claude' NOT NULL;--> statement-breakpoint
ALTER TABLE "runs" RENAME COLUMN "claude_session_id" TO "agent_session_id";--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "agent" text DEFAULT 'claude' NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "agent_session_id" text;--> statement-breakpoint
UPDATE "sessions" SET "agent_session_id" = "id"::text WHERE EXISTS (SELECT 1 FROM "runs" WHERE "runs"."session_id" = "sessions"."id" AND "runs"."agent_session_id" IS NOT NULL);
