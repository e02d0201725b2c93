CREATE TABLE "agent_transcripts" (
	"session_id" uuid PRIMARY KEY NOT NULL,
	"path" text NOT NULL,
	"sha256" text NOT NULL,
	"gzipped" "bytea" NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "agent_transcripts" ADD CONSTRAINT "agent_transcripts_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE cascade ON UPDATE no action;