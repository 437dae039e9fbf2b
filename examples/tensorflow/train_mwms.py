"""TensorFlow MultiWorkerMirroredStrategy from TF_CONFIG (written by trainctl or the TFJob operator).

Keras 3 `fit` is broken under this strategy (keras-team/keras#20585), so the example
uses Keras 2 (tf-keras) through TF_USE_LEGACY_KERAS=1, set before TensorFlow loads.

    trainctl submit tf --workers 2 -- python examples/tensorflow/train_mwms.py
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from result import parameter_hash, report  # noqa: E402


def main() -> None:
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    rank, world_size = task.get("index", 0), strategy.num_replicas_in_sync

    def rank_plus_one():
        context = tf.distribute.get_replica_context()
        return context.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(float(rank + 1)))

    total = strategy.experimental_local_results(strategy.run(rank_plus_one))[0]

    rng = np.random.default_rng(0)
    features = rng.normal(size=(512, 8)).astype("float32")
    target = (features @ np.arange(1.0, 9.0, dtype="float32")).reshape(-1, 1)
    dataset = tf.data.Dataset.from_tensor_slices((features, target)).repeat().batch(64)
    with strategy.scope():
        tf.keras.utils.set_random_seed(0)
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(8,))])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
    model.fit(dataset, epochs=2, steps_per_epoch=5, verbose=0)
    report("tensorflow", rank, world_size, float(total), parameter_hash([w for w in model.get_weights()]))


if __name__ == "__main__":
    main()
