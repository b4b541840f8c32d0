package io.github.beamdedup.flink;

import static org.apache.beam.runners.fnexecution.translation.PipelineTranslatorUtils.createOutputMap;
import static org.apache.beam.runners.fnexecution.translation.PipelineTranslatorUtils.getWindowingStrategy;
import static org.apache.beam.runners.fnexecution.translation.PipelineTranslatorUtils.instantiateCoder;
import static org.apache.beam.sdk.util.construction.ExecutableStageTranslation.generateNameFromStagePayload;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.beam.model.pipeline.v1.RunnerApi;
import org.apache.beam.runners.core.construction.SerializablePipelineOptions;
import org.apache.beam.runners.flink.FlinkPipelineOptions;
import org.apache.beam.runners.flink.FlinkPortablePipelineTranslator;
import org.apache.beam.runners.flink.FlinkStreamingPortablePipelineTranslator;
import org.apache.beam.runners.flink.FlinkStreamingPortablePipelineTranslator.StreamingTranslationContext;
import org.apache.beam.runners.flink.translation.functions.FlinkExecutableStageContextFactory;
import org.apache.beam.runners.flink.translation.functions.ImpulseSourceFunction;
import org.apache.beam.runners.flink.translation.types.CoderTypeInformation;
import org.apache.beam.runners.flink.translation.wrappers.streaming.DoFnOperator;
import org.apache.beam.runners.flink.translation.wrappers.streaming.SdfByteBufferKeySelector;
import org.apache.beam.runners.fnexecution.provisioning.JobInfo;
import org.apache.beam.sdk.coders.Coder;
import org.apache.beam.sdk.coders.KvCoder;
import org.apache.beam.sdk.util.WindowedValue;
import org.apache.beam.sdk.util.construction.PTransformTranslation;
import org.apache.beam.sdk.util.construction.graph.ExecutableStage;
import org.apache.beam.sdk.values.TupleTag;
import org.apache.beam.vendor.guava.v32_1_2_jre.com.google.common.collect.BiMap;
import org.apache.beam.vendor.guava.v32_1_2_jre.com.google.common.collect.ImmutableMap;
import org.apache.beam.vendor.guava.v32_1_2_jre.com.google.common.collect.Iterables;
import org.apache.flink.api.dag.Transformation;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.transformations.LegacySourceTransformation;
import org.apache.flink.util.OutputTag;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Beam's streaming translation of a portable pipeline (FlinkStreamingPortablePipelineTranslator,
 * which translates every other transform here, one at a time), with each stage that runs a
 * splittable DoFn (and no side input) translated onto SplittableStageOperator, and the impulses
 * told to end once those stages' sources have ended (ImpulseSourceFunction).
 *
 * <p>The stage's translation is what Beam's does for such a stage, to the operator's uid (the
 * transform's unique name, so that savepoints of either job server restore in the other), its
 * name, its key (the element, encoded) and its outputs.
 */
public final class SplittableStreamingTranslator
    implements FlinkPortablePipelineTranslator<StreamingTranslationContext> {
  private static final Logger LOG = LoggerFactory.getLogger(SplittableStreamingTranslator.class);

  /** The URN this translation gives the stages it translates itself. */
  static final String SPLITTABLE_STAGE_URN = "beamdedup:transform:splittable_stage:v1";

  private final FlinkStreamingPortablePipelineTranslator beam =
      new FlinkStreamingPortablePipelineTranslator(
          ImmutableMap.of(SPLITTABLE_STAGE_URN, this::translateSplittableStage));
  private final boolean endWithSources;
  /** The subtasks of the splittable stages translated. */
  private int splittableSubtasks;

  /**
   * endWithSources: the impulses end once the splittable sources have (the job did not set
   * shutdown_sources_after_idle_ms).
   */
  public SplittableStreamingTranslator(boolean endWithSources) {
    this.endWithSources = endWithSources;
  }

  @Override
  public StreamingTranslationContext createTranslationContext(
      JobInfo jobInfo,
      FlinkPipelineOptions pipelineOptions,
      String confDir,
      List<String> filesToStage) {
    return beam.createTranslationContext(jobInfo, pipelineOptions, confDir, filesToStage);
  }

  @Override
  public Set<String> knownUrns() {
    return beam.knownUrns();
  }

  @Override
  public Executor translate(StreamingTranslationContext context, RunnerApi.Pipeline pipeline) {
    RunnerApi.Pipeline.Builder marked = pipeline.toBuilder();
    for (Map.Entry<String, RunnerApi.PTransform> e :
        pipeline.getComponents().getTransformsMap().entrySet()) {
      RunnerApi.PTransform t = e.getValue();
      if (ExecutableStage.URN.equals(t.getSpec().getUrn())) {
        RunnerApi.ExecutableStagePayload stage = payload(t);
        if (runsSplittableDoFn(stage) && !isPlainSource(stage)) {
          LOG.warn(
              "Stage {} runs a splittable DoFn with side inputs, state or timers: Beam's operator"
                  + " runs it, with a state per resumption",
              t.getUniqueName());
        }
        if (runsSplittableDoFn(stage) && isPlainSource(stage)) {
          marked
              .getComponentsBuilder()
              .putTransforms(
                  e.getKey(),
                  t.toBuilder().setSpec(t.getSpec().toBuilder().setUrn(SPLITTABLE_STAGE_URN)).build());
        }
      }
    }
    splittableSubtasks = 0;
    beam.translate(context, marked.build());
    if (endWithSources) {
      LOG.info(
          "The job's impulses end once its {} subtasks of splittable stages have ended",
          splittableSubtasks);
      for (String id : pipeline.getRootTransformIdsList()) {
        RunnerApi.PTransform t = pipeline.getComponents().getTransformsOrThrow(id);
        if (!PTransformTranslation.IMPULSE_TRANSFORM_URN.equals(t.getSpec().getUrn())) {
          continue;
        }
        ImpulseSourceFunction impulse =
            impulseOf(
                context.getDataStreamOrThrow(Iterables.getOnlyElement(t.getOutputsMap().values())));
        if (impulse != null) {
          impulse.endWhenSplittableSourcesEnd(splittableSubtasks);
        }
      }
    }
    return context;
  }

  private void translateSplittableStage(
      String id, RunnerApi.Pipeline pipeline, StreamingTranslationContext context) {
    RunnerApi.PTransform transform = pipeline.getComponents().getTransformsOrThrow(id);
    splittableSubtasks +=
        translateSplittableStage(id, transform, payload(transform), pipeline, context);
  }

  private static RunnerApi.ExecutableStagePayload payload(RunnerApi.PTransform transform) {
    try {
      return RunnerApi.ExecutableStagePayload.parseFrom(transform.getSpec().getPayload());
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
  }

  private static boolean runsSplittableDoFn(RunnerApi.ExecutableStagePayload stage) {
    return stage.getComponents().getTransformsMap().values().stream()
        .anyMatch(
            t ->
                PTransformTranslation.SPLITTABLE_PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS_URN.equals(
                    t.getSpec().getUrn()));
  }

  /** No side input, no user state or timer: the stages this translation covers. */
  private static boolean isPlainSource(RunnerApi.ExecutableStagePayload stage) {
    return stage.getSideInputsCount() == 0
        && stage.getUserStatesCount() == 0
        && stage.getTimersCount() == 0;
  }

  private static ImpulseSourceFunction impulseOf(DataStream<?> stream) {
    Transformation<?> t = stream.getTransformation();
    if (t instanceof LegacySourceTransformation) {
      Object f = ((LegacySourceTransformation<?>) t).getOperator().getUserFunction();
      if (f instanceof ImpulseSourceFunction) {
        return (ImpulseSourceFunction) f;
      }
    }
    return null;
  }

  /** Translates the stage and returns its parallelism. */
  @SuppressWarnings({"rawtypes", "unchecked"})
  private int translateSplittableStage(
      String id,
      RunnerApi.PTransform transform,
      RunnerApi.ExecutableStagePayload stage,
      RunnerApi.Pipeline pipeline,
      StreamingTranslationContext context) {
    RunnerApi.Components components = pipeline.getComponents();
    FlinkPipelineOptions options = context.getPipelineOptions();
    Map<String, String> outputs = transform.getOutputsMap();
    // The same choice of main output as Beam's translation; none for a stage whose outputs are
    // all consumed within it.
    TupleTag mainOutputTag =
        outputs.isEmpty() ? null : new TupleTag(outputs.keySet().iterator().next());
    BiMap<String, Integer> outputIndex = createOutputMap(outputs.keySet());
    Map<TupleTag<?>, OutputTag<WindowedValue<?>>> outputTags = new java.util.LinkedHashMap<>();
    Map<TupleTag<?>, Coder<WindowedValue<?>>> outputCoders = new java.util.LinkedHashMap<>();
    Map<TupleTag<?>, Integer> outputIds = new java.util.HashMap<>();
    Map<String, TupleTag<?>> tagOfCollection = new java.util.HashMap<>();
    List<TupleTag<?>> additionalOutputTags = new ArrayList<>();
    for (String local : new TreeMap<>(outputIndex).keySet()) {
      String collection = outputs.get(local);
      Coder<WindowedValue<?>> coder = (Coder) instantiateCoder(collection, components);
      TupleTag<?> tag = new TupleTag<>(local);
      outputTags.put(tag, new OutputTag<>(local, new CoderTypeInformation<>(coder, options)));
      outputCoders.put(tag, coder);
      outputIds.put(tag, outputIndex.get(local));
      tagOfCollection.put(collection, tag);
      if (!local.equals(mainOutputTag.getId())) {
        additionalOutputTags.add(tag);
      }
    }
    String input = stage.getInput();
    Coder<WindowedValue<?>> inputCoder = (Coder) instantiateCoder(input, components);
    // KV<KV<element, KV<restriction, watermark state>>, size>, keyed by the element, as Beam's.
    KvCoder sized = (KvCoder) ((WindowedValue.FullWindowedValueCoder) inputCoder).getValueCoder();
    Coder elementCoder = ((KvCoder) sized.getKeyCoder()).getKeyCoder();
    SdfByteBufferKeySelector keySelector =
        new SdfByteBufferKeySelector(elementCoder, new SerializablePipelineOptions(options));
    DataStream<WindowedValue<?>> in = context.getDataStreamOrThrow(input);
    SplittableStageOperator operator =
        new SplittableStageOperator(
            transform.getUniqueName(),
            inputCoder,
            Collections.emptyMap(),
            mainOutputTag,
            additionalOutputTags,
            new DoFnOperator.MultiOutputOutputManagerFactory(
                mainOutputTag,
                outputTags,
                outputCoders,
                outputIds,
                new SerializablePipelineOptions(options)),
            Collections.emptyMap(),
            Collections.emptyList(),
            Collections.emptyMap(),
            options,
            stage,
            context.getJobInfo(),
            FlinkExecutableStageContextFactory.getInstance(),
            tagOfCollection,
            getWindowingStrategy(input, components),
            elementCoder,
            keySelector,
            endWithSources);
    SingleOutputStreamOperator out =
        in.keyBy(keySelector)
            .transform(
                generateNameFromStagePayload(stage),
                mainOutputTag == null
                    ? null
                    : new CoderTypeInformation<>(outputCoders.get(mainOutputTag), options),
                operator);
    out.uid(transform.getUniqueName());
    if (mainOutputTag != null) {
      context.addDataStream(outputs.get(mainOutputTag.getId()), out);
    }
    for (TupleTag<?> tag : additionalOutputTags) {
      context.addDataStream(outputs.get(tag.getId()), out.getSideOutput(outputTags.get(tag)));
    }
    int parallelism = out.getParallelism();
    if (parallelism <= 0) {
      parallelism = context.getExecutionEnvironment().getParallelism();
    }
    LOG.info(
        "Stage {}: a splittable source, on the job server's operator ({} subtasks)",
        transform.getUniqueName(),
        parallelism);
    return parallelism;
  }
}
