#!/bin/sh
# The bench's stand-in for the `claude` CLI. It reads the one stream-json user message its caller
# writes on stdin (the bridge, the Agent SDK's `query()`, the floor) and takes the prompt text as
# its orders:
#   @/path/transcript.jsonl   write that recorded transcript as fast as the pipe takes it (cat)
#   !stamped N RATE           hand over to fake-stamped.pl (stamped lines, paced or not)
#   !MODE ARGS...             hand over to fake-cli.mjs (hold, api)
# It is a POSIX shell script so that a recorded run costs a fork of `cat`, not a Node start-up.
# Its arguments (the bridge's, the SDK's) are not read, but for `--version`.
# An `initialize` control request (the bridge and the SDK send one before the user message) is
# answered as the real CLI answers it, first of all (src/agents/claude/hooks.ts): a success with
# the request's id, no slash commands and the hooks taken. Its id is cut out of the line with
# parameter expansions, so that answering costs no process.
case "$1" in --version) echo "2.1.328 (agent-bridge bench fake)"; exit 0 ;; esac
while IFS= read -r line; do
  case "$line" in
    *'"type":"user"'*) break ;;
    *'"subtype":"initialize"'*)
      id=${line#*\"request_id\":\"}
      id=${id%%\"*}
      printf '{"type":"control_response","response":{"subtype":"success","request_id":"%s","response":{"commands":[],"agents":[],"models":[],"pid":%s,"claude_code_version":"2.1.328","hooks_applied":true}}}\n' "$id" "$$"
      ;;
  esac
done
text=${line#*\"text\":\"}
text=${text%%\"*}
case "$text" in
  @*) exec cat "${text#@}" ;;
  # Word splitting of the orders is wanted here.
  # shellcheck disable=SC2086
  !stamped*) exec perl "${0%/*}/fake-stamped.pl" ${text#!stamped} ;;
  !*) exec node "${0%/*}/fake-cli.mjs" ${text#!} ;;
  *) echo "bench fake: unknown orders: $text" >&2; exit 2 ;;
esac
