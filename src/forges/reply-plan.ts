import type { NewReply } from "../store/replies.js";
import type { HookRow, ReplySettings } from "../store/schema.js";
import { type ForgeDelivery, readDelivery } from "./delivery.js";
import { forgeOf } from "./hook-forge.js";

// Which replies a delivery's run gets: from the hook's `reply` and what the delivery is about. A
// comment goes on the issue or pull (merge) request; a check run or commit status on the pull
// request's head commit (looked up when the payload does not carry it); a review on the pull
// request. A delivery about neither (a push, a schedule's tick) gets no reply at all.

/**
 * The defaults of each field of `reply` not given: a comment and a commit status. A check run is
 * asked for by name: GitHub lets only a GitHub App's token create one, and a hook's token is more
 * often a person's (a fine-grained token), which may set statuses.
 */
export function replySettings(given: {
  comment?: boolean;
  status?: ReplySettings["status"];
  review_comments?: boolean;
}): ReplySettings {
  return {
    comment: given.comment ?? true,
    status: given.status ?? "status",
    reviewComments: given.review_comments ?? false,
  };
}

export function planReplies(
  hook: Pick<HookRow, "id" | "name" | "forge" | "reply">,
  event: string,
  payload: unknown,
): NewReply[] {
  const forge = forgeOf(hook);
  if (!forge || !hook.reply) return [];
  return repliesFor(hook, hook.reply, readDelivery(forge, event, payload));
}

function repliesFor(
  hook: Pick<HookRow, "id" | "name">,
  settings: ReplySettings,
  delivery: ForgeDelivery,
): NewReply[] {
  const { subject } = delivery;
  if (!subject || (!delivery.repository && delivery.projectId === null)) return [];
  const target = {
    forge: delivery.forge,
    repository: delivery.repository,
    projectId: delivery.projectId,
    subject,
    sha: delivery.change?.headSha ?? null,
    name: `agent-bridge/${hook.name}`,
  };
  const onChange = subject.kind === "pull_request";
  const planned: NewReply[] = [];
  const add = (kind: NewReply["kind"]) => planned.push({ hookId: hook.id, kind, target });
  if (settings.comment) add("comment");
  if (onChange && settings.status !== "none") add(settings.status);
  if (onChange && settings.reviewComments) add("review");
  return planned;
}
