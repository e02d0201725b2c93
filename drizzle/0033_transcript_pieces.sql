CREATE TABLE "agent_transcript_pieces" (
	"session_id" uuid NOT NULL,
	"seq" integer NOT NULL,
	"gzipped" "bytea" NOT NULL,
	CONSTRAINT "agent_transcript_pieces_session_id_seq_pk" PRIMARY KEY("session_id","seq")
);
--> statement-breakpoint
ALTER TABLE "agent_transcripts" ADD COLUMN "length" integer;--> statement-breakpoint
ALTER TABLE "agent_transcripts" ADD COLUMN "seam" text;--> statement-breakpoint
ALTER TABLE "agent_transcript_pieces" ADD CONSTRAINT "agent_transcript_pieces_session_id_agent_transcripts_session_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."agent_transcripts"("session_id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- A transcript stored whole becomes its first piece. Its length is the gzip trailer's (ISIZE, the
-- last four bytes, little-endian: the length itself, a stored transcript being at most 64 MiB;
-- each shift in parentheses, as `<<` and `|` bind alike); its seam is left null, for the next
-- store or restore to find by reading it.
INSERT INTO "agent_transcript_pieces" ("session_id", "seq", "gzipped")
SELECT "session_id", 0, "gzipped" FROM "agent_transcripts";--> statement-breakpoint
UPDATE "agent_transcripts" SET "length" =
	(get_byte("gzipped", length("gzipped") - 1) << 24) | (get_byte("gzipped", length("gzipped") - 2) << 16) |
	(get_byte("gzipped", length("gzipped") - 3) << 8) | get_byte("gzipped", length("gzipped") - 4);--> statement-breakpoint
ALTER TABLE "agent_transcripts" ALTER COLUMN "length" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "agent_transcripts" DROP COLUMN "sha256";--> statement-breakpoint
ALTER TABLE "agent_transcripts" DROP COLUMN "gzipped";
