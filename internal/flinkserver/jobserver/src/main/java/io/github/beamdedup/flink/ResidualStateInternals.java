package io.github.beamdedup.flink;

import java.nio.ByteBuffer;
import org.apache.beam.runners.core.StateNamespace;
import org.apache.beam.runners.core.StateTag;
import org.apache.beam.runners.core.StateTags;
import org.apache.beam.runners.flink.translation.wrappers.streaming.state.FlinkStateInternals;
import org.apache.beam.runners.fnexecution.control.BundleCheckpointHandlers.StateAndTimerBundleCheckpointHandler;
import org.apache.beam.sdk.coders.Coder;
import org.apache.beam.sdk.coders.StringUtf8Coder;
import org.apache.beam.sdk.state.MapState;
import org.apache.beam.sdk.state.State;
import org.apache.beam.sdk.state.StateContext;
import org.apache.beam.sdk.state.ValueState;
import org.apache.flink.runtime.state.KeyedStateBackend;

/**
 * The keyed state of a splittable DoFn's stage, with the residuals of its self-checkpoints in one
 * map state, {@value #RESIDUALS}, instead of a value state each.
 *
 * <p>Beam's Flink runner (2.62.0) writes each residual a splittable DoFn leaves when it asks to be
 * resumed into a value state named after it ({@code sdf_checkpoint:<id>:<index>}) and never
 * unregisters it: a state backend keeps every name registered while the task runs and writes
 * each into every checkpoint, and the heap backend refuses to snapshot more than 32,767 (Beam
 * issue apache/beam#27648; Beam fixed it in apache/beam#39191, after its last Flink 1.19 runner).
 * Here a value state of such a name is an entry of the map, read once (the residual's timer reads
 * it to resume the DoFn) and removed by that read, so a task registers one name however often its
 * sources resume. A residual missing from the map is read from a value state of its name once:
 * one written by Beam's own runner, restored from its savepoint.
 */
final class ResidualStateInternals<K> extends FlinkStateInternals<K> {
  /** The map state's name. */
  static final String RESIDUALS = "sdf_checkpoint_residuals";

  private final Coder<?> residualCoder;

  ResidualStateInternals(
      KeyedStateBackend<ByteBuffer> backend,
      Coder<K> keyCoder,
      org.apache.beam.runners.core.construction.SerializablePipelineOptions options,
      Coder<?> residualCoder)
      throws Exception {
    super(backend, keyCoder, options);
    this.residualCoder = residualCoder;
  }

  @Override
  @SuppressWarnings({"unchecked", "rawtypes"})
  public <T extends State> T state(
      StateNamespace namespace, StateTag<T> address, StateContext<?> context) {
    if (!StateAndTimerBundleCheckpointHandler.isSdfTimer(address.getId())) {
      return super.state(namespace, address, context);
    }
    MapState<String, Object> residuals =
        (MapState<String, Object>)
            super.state(
                namespace,
                StateTags.map(RESIDUALS, StringUtf8Coder.of(), (Coder) residualCoder),
                context);
    return (T) new Residual(residuals, address.getId(), () -> super.state(namespace, address, context));
  }

  /** The value state that read Beam's own runner's residual of a name. */
  private interface Legacy {
    State get();
  }

  /** One residual: an entry of the map, removed when read. */
  private static final class Residual implements ValueState<Object> {
    private final MapState<String, Object> residuals;
    private final String name;
    private final Legacy legacy;

    Residual(MapState<String, Object> residuals, String name, Legacy legacy) {
      this.residuals = residuals;
      this.name = name;
      this.legacy = legacy;
    }

    @Override
    public void write(Object value) {
      residuals.put(name, value);
    }

    @Override
    @SuppressWarnings("unchecked")
    public Object read() {
      Object value = residuals.get(name).read();
      if (value != null) {
        residuals.remove(name);
        return value;
      }
      ValueState<Object> old = (ValueState<Object>) legacy.get();
      value = old.read();
      old.clear();
      return value;
    }

    @Override
    public ValueState<Object> readLater() {
      return this;
    }

    @Override
    public void clear() {
      residuals.remove(name);
    }
  }
}
