CREATE TABLE "callbacks" (
	"run_id" uuid PRIMARY KEY NOT NULL,
	"url" text NOT NULL,
	"secret" text NOT NULL,
	"state" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone,
	"locked_until" timestamp with time zone,
	"body" text,
	"last_error" text,
	"last_status" integer,
	"created_at" timestamp with time zone NOT NULL,
	"delivered_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "hook_deliveries" (
	"id" uuid PRIMARY KEY NOT NULL,
	"hook_id" uuid NOT NULL,
	"delivery_id" text NOT NULL,
	"source" text NOT NULL,
	"event" text NOT NULL,
	"received_at" timestamp with time zone NOT NULL,
	"outcome" text NOT NULL,
	"detail" text,
	"run_id" uuid,
	"session_id" uuid
);
--> statement-breakpoint
CREATE TABLE "hook_sessions" (
	"hook_id" uuid NOT NULL,
	"key" text NOT NULL,
	"session_id" uuid NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "hook_sessions_hook_id_key_pk" PRIMARY KEY("hook_id","key")
);
--> statement-breakpoint
CREATE TABLE "hooks" (
	"id" uuid PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"owner_key_id" uuid,
	"verification" text NOT NULL,
	"secret" text NOT NULL,
	"prompt_template" text NOT NULL,
	"system_prompt_template" text,
	"session_key_template" text,
	"work_dir" text,
	"worktree" boolean,
	"permission_mode" text,
	"model" text,
	"effort" text,
	"events" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"callback_url" text,
	"callback_secret" text,
	"schedule" text,
	"timezone" text,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "hooks_name_unique" UNIQUE("name")
);
--> statement-breakpoint
ALTER TABLE "callbacks" ADD CONSTRAINT "callbacks_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "hook_deliveries" ADD CONSTRAINT "hook_deliveries_hook_id_hooks_id_fk" FOREIGN KEY ("hook_id") REFERENCES "public"."hooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "hook_deliveries" ADD CONSTRAINT "hook_deliveries_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "hook_deliveries" ADD CONSTRAINT "hook_deliveries_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "hook_sessions" ADD CONSTRAINT "hook_sessions_hook_id_hooks_id_fk" FOREIGN KEY ("hook_id") REFERENCES "public"."hooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "hook_sessions" ADD CONSTRAINT "hook_sessions_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "hooks" ADD CONSTRAINT "hooks_owner_key_id_api_keys_id_fk" FOREIGN KEY ("owner_key_id") REFERENCES "public"."api_keys"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "callbacks_due_idx" ON "callbacks" USING btree ("next_attempt_at") WHERE "callbacks"."state" = 'pending';--> statement-breakpoint
CREATE UNIQUE INDEX "hook_deliveries_hook_delivery_id" ON "hook_deliveries" USING btree ("hook_id","delivery_id");--> statement-breakpoint
CREATE INDEX "hook_deliveries_hook_received_idx" ON "hook_deliveries" USING btree ("hook_id","received_at" DESC NULLS LAST,"id" DESC NULLS LAST);