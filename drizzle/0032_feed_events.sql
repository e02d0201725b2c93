CREATE TABLE "feed_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"owner_key_id" uuid,
	"session_id" uuid,
	"run_id" uuid,
	"data" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "feed_events_owner_key_id_id_idx" ON "feed_events" USING btree ("owner_key_id","id");--> statement-breakpoint
CREATE INDEX "feed_events_session_id_id_idx" ON "feed_events" USING btree ("session_id","id");