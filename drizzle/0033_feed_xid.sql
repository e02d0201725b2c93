DROP INDEX "feed_events_owner_key_id_id_idx";--> statement-breakpoint
DROP INDEX "feed_events_session_id_id_idx";--> statement-breakpoint
ALTER TABLE "feed_events" ADD COLUMN "xid" "xid8" DEFAULT pg_current_xact_id() NOT NULL;--> statement-breakpoint
CREATE INDEX "feed_events_xid_id_idx" ON "feed_events" USING btree ("xid","id");--> statement-breakpoint
CREATE INDEX "feed_events_owner_key_id_xid_id_idx" ON "feed_events" USING btree ("owner_key_id","xid","id");--> statement-breakpoint
CREATE INDEX "feed_events_session_id_xid_id_idx" ON "feed_events" USING btree ("session_id","xid","id");