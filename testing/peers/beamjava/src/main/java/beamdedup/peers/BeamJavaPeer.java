package beamdedup.peers;

import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.PipelineResult;
import org.apache.beam.sdk.io.TextIO;
import org.apache.beam.sdk.metrics.Counter;
import org.apache.beam.sdk.metrics.MetricNameFilter;
import org.apache.beam.sdk.metrics.MetricResult;
import org.apache.beam.sdk.metrics.Metrics;
import org.apache.beam.sdk.metrics.MetricsFilter;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.beam.sdk.transforms.Deduplicate;
import org.apache.beam.sdk.transforms.DoFn;
import org.apache.beam.sdk.transforms.ParDo;
import org.apache.beam.sdk.values.KV;

/**
 * Beam Java's Deduplicate on the orders workload: rows keyed by order_id,
 * Deduplicate.keyedValues() with its defaults (a 10-minute processing-time
 * duration), on the runner the options name (the direct runner, or Flink's
 * classic runner with an embedded cluster). Prints
 * "beam_java_RUNNER rows=... emitted=... seconds=... rows_per_s=...".
 *
 * <pre>
 * BeamJavaPeer FILE [Beam options, e.g. --runner=FlinkRunner --flinkMaster=[local]]
 * </pre>
 */
public final class BeamJavaPeer {
  private BeamJavaPeer() {}

  /** Keys a JSON line by its order_id (the generator writes it first). */
  static class KeyFn extends DoFn<String, KV<String, String>> {
    private final Counter rows = Metrics.counter("peer", "rows_in");

    @ProcessElement
    public void process(@Element String line, OutputReceiver<KV<String, String>> out) {
      rows.inc();
      int i = line.indexOf("\"order_id\":\"");
      if (i < 0) {
        return;
      }
      int from = i + "\"order_id\":\"".length();
      out.output(KV.of(line.substring(from, line.indexOf('"', from)), line));
    }
  }

  static class CountFn extends DoFn<KV<String, String>, Void> {
    private final Counter emitted = Metrics.counter("peer", "emitted");

    @ProcessElement
    public void process(@Element KV<String, String> kv) {
      emitted.inc();
    }
  }

  public static void main(String[] args) {
    String[] beamArgs = java.util.Arrays.copyOfRange(args, 1, args.length);
    PipelineOptions opts = PipelineOptionsFactory.fromArgs(beamArgs).create();
    Pipeline p = Pipeline.create(opts);
    p.apply("Read", TextIO.read().from(args[0]))
        .apply("Key", ParDo.of(new KeyFn()))
        .apply("Dedup", Deduplicate.keyedValues())
        .apply("Count", ParDo.of(new CountFn()));
    long start = System.nanoTime();
    PipelineResult r = p.run();
    r.waitUntilFinish();
    double secs = (System.nanoTime() - start) / 1e9;
    long rows = counter(r, "rows_in");
    System.out.printf(
        "beam_java_%s rows=%d emitted=%d seconds=%.3f rows_per_s=%.0f%n",
        opts.getRunner().getSimpleName(), rows, counter(r, "emitted"), secs, rows / secs);
  }

  static long counter(PipelineResult r, String name) {
    long n = 0;
    for (MetricResult<Long> c :
        r.metrics()
            .queryMetrics(
                MetricsFilter.builder().addNameFilter(MetricNameFilter.named("peer", name)).build())
            .getCounters()) {
      n += c.getAttempted();
    }
    return n;
  }
}
