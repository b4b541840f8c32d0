package org.apache.beam.runners.flink;

import static org.apache.beam.runners.fnexecution.translation.PipelineTranslatorUtils.hasUnboundedPCollections;

import io.github.beamdedup.flink.SplittableStreamingTranslator;
import java.util.List;
import java.util.Map;
import org.apache.beam.model.pipeline.v1.RunnerApi.Pipeline;
import org.apache.beam.runners.flink.FlinkStreamingPortablePipelineTranslator.StreamingTranslationContext;
import org.apache.beam.runners.fnexecution.provisioning.JobInfo;
import org.apache.beam.runners.jobsubmission.PortablePipelineResult;
import org.apache.beam.runners.jobsubmission.PortablePipelineRunner;
import org.apache.beam.sdk.metrics.MetricsEnvironment;
import org.apache.beam.sdk.metrics.MetricsOptions;
import org.apache.beam.sdk.options.SdkHarnessOptions;
import org.apache.beam.runners.core.metrics.MetricsPusher;
import org.apache.flink.api.common.JobExecutionResult;
import org.checkerframework.checker.nullness.qual.Nullable;

/**
 * Beam's FlinkPipelineRunner, with a job in streaming mode translated by
 * SplittableStreamingTranslator: its splittable sources on the job server's own operator, and its
 * impulses ending once its splittable sources have (unless the job set
 * shutdown_sources_after_idle_ms). A job in batch mode, or one that asks for Beam's runner as
 * released (the Go option stock_flink_runner=true, for reproductions), runs on Beam's.
 */
class GoPipelineRunner implements PortablePipelineRunner {
  private final FlinkPipelineOptions options;
  private final @Nullable String confDir;
  private final List<String> filesToStage;
  private final boolean stock;

  GoPipelineRunner(
      FlinkPipelineOptions options,
      @Nullable String confDir,
      List<String> filesToStage,
      boolean stock) {
    this.options = options;
    this.confDir = options.getFlinkConfDir() != null ? options.getFlinkConfDir() : confDir;
    this.filesToStage = filesToStage;
    this.stock = stock;
  }

  @Override
  public PortablePipelineResult run(Pipeline pipeline, JobInfo jobInfo) throws Exception {
    if (stock || (!options.isStreaming() && !hasUnboundedPCollections(pipeline))) {
      return new FlinkPipelineRunner(options, confDir, filesToStage).run(pipeline, jobInfo);
    }
    MetricsEnvironment.setMetricsSupported(false);
    SdkHarnessOptions.getConfiguredLoggerFromOptions(options.as(SdkHarnessOptions.class));
    boolean endWithSources = options.getShutdownSourcesAfterIdleMs() == -1;
    if (endWithSources) {
      // The impulses stay up until the splittable sources end, checkpoints on or off.
      options.setShutdownSourcesAfterIdleMs(Long.MAX_VALUE);
    }
    SplittableStreamingTranslator translator = new SplittableStreamingTranslator(endWithSources);
    StreamingTranslationContext context =
        translator.createTranslationContext(jobInfo, options, confDir, filesToStage);
    JobExecutionResult result =
        translator
            .translate(context, translator.prepareForTranslation(pipeline))
            .execute(options.getJobName());
    if ("org.apache.flink.core.execution.DetachedJobExecutionResult"
        .equals(result.getClass().getCanonicalName())) {
      return new FlinkPortableRunnerResult.Detached();
    }
    Map<String, Object> accumulators = result.getAllAccumulatorResults();
    FlinkPortableRunnerResult r = new FlinkPortableRunnerResult(accumulators, result.getNetRuntime());
    new MetricsPusher(r.getMetricsContainerStepMap(), options.as(MetricsOptions.class), r).start();
    return r;
  }
}
