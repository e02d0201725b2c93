CREATE TABLE "permission_requests" (
	"run_id" uuid NOT NULL,
	"request_id" text NOT NULL,
	"tool_name" text NOT NULL,
	"tool_use_id" text,
	"input" jsonb NOT NULL,
	"suggestions" jsonb NOT NULL,
	"state" text NOT NULL,
	"by" text,
	"answer" jsonb,
	"scope" text,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"answered_at" timestamp with time zone,
	CONSTRAINT "permission_requests_run_id_request_id_pk" PRIMARY KEY("run_id","request_id")
);
--> statement-breakpoint
ALTER TABLE "hooks" ADD COLUMN "approvals" text DEFAULT 'deny' NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "approvals" text DEFAULT 'deny' NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "approval_timeout_seconds" integer;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "allowed_tools" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "permission_requests" ADD CONSTRAINT "permission_requests_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;