#!/usr/bin/perl
# The bench fake's stamped mode (fake-cli.sh hands `!stamped N RATE` over here): N text deltas,
# each stamped with its write time in ms since the epoch, RATE lines per second (0 = as fast as the
# pipe takes them), in messages of 500, each repeated whole, then a result. The line shapes are
# the real CLI's (see test/support/stream-json-lines.ts).
#
# Perl, not Node: 50 paced Node fakes took about 0.9 s of CPU each (start-up, and a timer per
# line), more than a 2-core machine has, so the concurrency figures measured the fakes' CPU
# starvation rather than the bridge. Here a paced run costs a few tens of ms.
use strict;
use warnings;
use Time::HiRes qw(time sleep);

my ($count, $rate) = @ARGV;
my $sid = "11111111-2222-3333-4444-555555555555";
$| = 1;

sub stream_event {
  my ($id, $event) = @_;
  my $uuid = sprintf("se-%s-%08x", $id, int(rand(2**32)));
  print qq({"type":"stream_event","event":$event,"session_id":"$sid","parent_tool_use_id":null,"uuid":"$uuid","api_message_id":"$id"}\n);
}

print qq({"type":"system","subtype":"init","session_id":"$sid","model":"claude-bench"}\n);
my $start = time();
my ($text, $id) = ("", "");
for my $i (0 .. $count - 1) {
  if ($i % 500 == 0) {
    $id = "msg_" . int($i / 500);
    stream_event($id, qq({"type":"message_start","message":{"id":"$id","type":"message","role":"assistant","model":"claude-bench","content":[],"usage":{"input_tokens":100}}}));
    stream_event($id, q({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}));
  }
  if ($rate > 0) {
    # Sleeps are 10 ms at least: lines falling due meanwhile go out together, each stamped.
    my $wait = $start + $i / $rate - time();
    sleep($wait > 0.01 ? $wait : 0.01) if $wait > 0;
  }
  my $piece = sprintf("%d@%.3f;", $i, time() * 1000);
  $text .= $piece;
  stream_event($id, qq({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"$piece"}}));
  if (($i + 1) % 500 == 0 || $i == $count - 1) {
    print qq({"type":"assistant","message":{"id":"$id","type":"message","role":"assistant","model":"claude-bench","content":[{"type":"text","text":"$text"}],"usage":{"input_tokens":100,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"$sid","uuid":"a-$id"}\n);
    stream_event($id, q({"type":"content_block_stop","index":0}));
    $text = "";
  }
}
print qq({"type":"result","subtype":"success","is_error":false,"duration_ms":1,"duration_api_ms":1,"num_turns":1,"result":"Done.","session_id":"$sid","total_cost_usd":0,"usage":{"input_tokens":100,"output_tokens":1,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"modelUsage":{"claude-bench":{"contextWindow":200000}},"uuid":"result-uuid"}\n);
