#!/bin/sh
# The transcript round's stand-in for the `claude` CLI. As the CLI does, each run appends to its
# session's transcript, `$CLAUDE_CONFIG_DIR/projects/-bench/<session id>.jsonl` (where the bridge
# looks for it): the lines of the file the prompt text names. It answers with the lines of
# `<that file>.answer`, its `@ID@` the session's id.
case "$1" in --version) echo "2.1.328 (agent-bridge bench fake)"; exit 0 ;; esac
id=
prev=
for arg; do
  case "$prev" in --session-id | --resume) id=$arg ;; esac
  case "$arg" in --session-id=* | --resume=*) id=${arg#*=} ;; esac
  prev=$arg
done
while IFS= read -r line; do
  case "$line" in *'"type":"user"'*) break ;; esac
done
text=${line#*\"text\":\"}
text=${text%%\"*}
dir="$CLAUDE_CONFIG_DIR/projects/-bench"
mkdir -p "$dir"
cat "$text" >>"$dir/$id.jsonl"
exec sed "s/@ID@/$id/g" "$text.answer"
