ALTER TABLE "sessions" ADD COLUMN "disallowed_tools" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "add_dirs" jsonb DEFAULT '[]'::jsonb NOT NULL;