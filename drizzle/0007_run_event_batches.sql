CREATE TABLE "run_event_batches" (
	"run_id" uuid NOT NULL,
	"first_seq" integer NOT NULL,
	"last_seq" integer NOT NULL,
	"last_public_seq" integer NOT NULL,
	"events" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "run_event_batches_run_id_last_seq_pk" PRIMARY KEY("run_id","last_seq")
);
--> statement-breakpoint
ALTER TABLE "run_event_batches" ADD CONSTRAINT "run_event_batches_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
-- Existing logs move over in batches of 1 000 events, each line as src/store/events.ts writes it:
-- seq, public seq, type and the event's JSON (type first, then the stored data, byte for byte).
INSERT INTO "run_event_batches" ("run_id", "first_seq", "last_seq", "last_public_seq", "events", "created_at")
SELECT "run_id", min("seq"), max("seq"), coalesce(max("public_so_far"), 0),
	string_agg(
		"seq" || E'\t' || coalesce("public_seq"::text, '') || E'\t' || "type" || E'\t' ||
		'{"type":' || to_json("type")::text ||
		CASE WHEN "data"::text ~ '^\s*\{\s*\}\s*$' THEN '}' ELSE ',' || substr(ltrim("data"::text), 2) END,
		E'\n' ORDER BY "seq"),
	max("created_at")
FROM (
	SELECT *, max("public_seq") OVER (PARTITION BY "run_id" ORDER BY "seq") AS "public_so_far"
	FROM "run_events"
	WHERE "run_id" IN (SELECT "id" FROM "runs")
) AS "e"
GROUP BY "run_id", ("seq" - 1) / 1000;
--> statement-breakpoint
DROP TABLE "run_events" CASCADE;
