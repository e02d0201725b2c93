// The database's tables (Drizzle), a module per domain under tables/, and their row types: the
// rest of the code, and drizzle-kit, import them from here.

import type { feedEvents } from "./tables/feed.js";
import type { callbacks, hookDeliveries, hooks } from "./tables/hooks.js";
import type { apiKeys } from "./tables/keys.js";
import type { replies } from "./tables/replies.js";
import type { modelCalls, permissionRequests, runs } from "./tables/runs.js";
import type { sessions, worktrees } from "./tables/sessions.js";

export * from "./tables/feed.js";
export * from "./tables/hooks.js";
export * from "./tables/keys.js";
export * from "./tables/replies.js";
export * from "./tables/runs.js";
export * from "./tables/sessions.js";

export type ApiKeyRow = typeof apiKeys.$inferSelect;
export type SessionRow = typeof sessions.$inferSelect;
export type RunRow = typeof runs.$inferSelect;
export type WorktreeRow = typeof worktrees.$inferSelect;
export type HookRow = typeof hooks.$inferSelect;
export type HookDeliveryRow = typeof hookDeliveries.$inferSelect;
export type CallbackRow = typeof callbacks.$inferSelect;
export type ReplyRow = typeof replies.$inferSelect;
export type PermissionRequestRow = typeof permissionRequests.$inferSelect;
export type ModelCallRow = typeof modelCalls.$inferSelect;
export type FeedEventRow = typeof feedEvents.$inferSelect;
