#!/bin/sh
# The bench's stand-in for the `claude` CLI. It reads the one stream-json user message the bridge
# writes on stdin and takes the prompt text as its orders:
#   @/path/transcript.jsonl   write that recorded transcript as fast as the pipe takes it (cat)
#   !stamped N RATE           hand over to fake-stamped.pl (stamped lines, paced or not)
#   !MODE ARGS...             hand over to fake-cli.mjs (hold, api)
# It is a POSIX shell script so that a recorded run costs a fork of `cat`, not a Node start-up.
# The bridge's `initialize` control request comes first; the fake leaves it unanswered, as a CLI
# without hooks to register may (the run needs no answer to go on).
case "$1" in --version) echo "2.1.328 (agent-bridge bench fake)"; exit 0 ;; esac
while IFS= read -r line; do
  case "$line" in *'"type":"user"'*) break ;; esac
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
