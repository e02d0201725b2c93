CREATE TABLE "replies" (
	"id" uuid PRIMARY KEY NOT NULL,
	"run_id" uuid NOT NULL,
	"hook_id" uuid,
	"kind" text NOT NULL,
	"target" jsonb NOT NULL,
	"phase" text NOT NULL,
	"state" text NOT NULL,
	"object_id" text,
	"url" text,
	"tools" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"revision" integer DEFAULT 0 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"failures" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone,
	"locked_until" timestamp with time zone,
	"body" text,
	"last_status" integer,
	"last_error" text,
	"sent_at" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "checkout_origin" text;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "triggers" jsonb;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "trusted" jsonb;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "fork" jsonb;--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "reply" jsonb;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "egress" jsonb;--> statement-breakpoint
ALTER TABLE "replies" ADD CONSTRAINT "replies_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "replies" ADD CONSTRAINT "replies_hook_id_hooks_id_fk" FOREIGN KEY ("hook_id") REFERENCES "public"."hooks"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "replies_run_kind" ON "replies" USING btree ("run_id","kind");--> statement-breakpoint
CREATE INDEX "replies_due_idx" ON "replies" USING btree ("next_attempt_at") WHERE "replies"."state" = 'pending';