"""Beam Python's Deduplicate on our rows, on a Prism binary we give it.

Reads the orders workload (JSON Lines, testing/peers/cmd/peerdata), keys
each row by order_id and runs DeduplicatePerKey (an event-time duration:
with a processing-time one, Prism holds a bounded job until the timers'
real time comes, so the job does not end before the duration passes)
with the SDK worker in this process (LOOPBACK), so that the Fn API state
requests it sends can be counted here. Prints one result line,
"beam_python key=value ...", for testing/peers.

  python dedup_peer.py --prism=PATH --input=orders.jsonl [--duration=7200] [--processing_time]
"""

import argparse
import collections
import json
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.worker import sdk_worker
from apache_beam.transforms.deduplicate import DeduplicatePerKey

REQUESTS = collections.Counter()
_request = sdk_worker.GrpcStateHandler._request


def _counting_request(self, request):
  """Counts each state request by kind (get, append, clear) before it goes."""
  REQUESTS[request.WhichOneof('request')] += 1
  return _request(self, request)


sdk_worker.GrpcStateHandler._request = _counting_request


class Count(beam.DoFn):
  """Counts the rows it sees in a metric, like our pipelines' counters."""
  def __init__(self, name):
    self.counter = beam.metrics.Metrics.counter('peer', name)

  def process(self, element):
    self.counter.inc()
    yield element


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--prism', required=True, help='the prism binary')
  parser.add_argument('--input', required=True, help='orders, JSON Lines')
  parser.add_argument(
      '--duration',
      type=float,
      default=7200,
      help='DeduplicatePerKey duration, seconds (required by Beam: no '
      '"forever")')
  parser.add_argument(
      '--processing_time',
      action='store_true',
      help='a processing_time_duration instead of an event_time_duration')
  args = parser.parse_args()
  opts = PipelineOptions([
      '--runner=PrismRunner',
      '--prism_location=' + args.prism,
      '--environment_type=LOOPBACK',
      # As our runs on Prism: no splitting of running bundles.
      '--experiments=prism_disable_sdf_split',
  ])
  duration = {
      'processing_time_duration' if args.processing_time else 'event_time_duration': args.duration
  }
  start = time.monotonic()
  with beam.Pipeline(options=opts) as p:
    _ = (
        p
        | 'Read' >> beam.io.ReadFromText(args.input)
        | 'Parse' >> beam.Map(json.loads)
        | 'CountIn' >> beam.ParDo(Count('rows_in'))
        | 'Key' >> beam.Map(lambda row: (row['order_id'], row))
        | 'Dedup' >> DeduplicatePerKey(**duration)
        | 'CountOut' >> beam.ParDo(Count('emitted')))
  result = p.result
  seconds = time.monotonic() - start
  got = {}
  for c in result.metrics().query()['counters']:
    got[c.key.metric.name] = got.get(c.key.metric.name, 0) + c.committed
  rows = got.get('rows_in', 0)
  total = sum(REQUESTS.values())
  print(
      'beam_python rows=%d emitted=%d seconds=%.3f rows_per_s=%.0f '
      'state_requests=%d requests_per_row=%.3f gets=%d appends=%d clears=%d' %
      (
          rows,
          got.get('emitted', 0),
          seconds,
          rows / seconds if seconds else 0,
          total,
          total / rows if rows else 0,
          REQUESTS['get'],
          REQUESTS['append'],
          REQUESTS['clear']))


if __name__ == '__main__':
  main()
