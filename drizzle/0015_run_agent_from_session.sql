-- Runs of a codex session were written with the column's default agent, `claude`: a run's agent
-- is its session's.
UPDATE "runs" SET "agent" = "sessions"."agent" FROM "sessions" WHERE "runs"."session_id" = "sessions"."id" AND "runs"."agent" <> "sessions"."agent";
