"""A real, small tuning run: stochastic gradient descent on a noisy linear regression.

Run it with `make demo`. Each trial fits the same data with its own learning rate, batch size
and L2 penalty, reports the validation loss after every epoch (with a checkpoint), and stops
after 15 epochs. Two trials run at a time in worker processes; every result lands in
`nbtune-runs/demo/`.
"""

import numpy as np

import nbtune as nt


def make_data(seed: int = 0, n: int = 2000, features: int = 20):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features))
    w = rng.normal(size=features)
    y = x @ w + rng.normal(scale=0.5, size=n)
    return x[:1500], y[:1500], x[1500:], y[1500:]


def train(config):
    x, y, x_val, y_val = make_data()
    rng = np.random.default_rng(config["seed"])
    checkpoint = nt.get_checkpoint()
    w = checkpoint["w"] if checkpoint else np.zeros(x.shape[1])
    start = checkpoint["epoch"] + 1 if checkpoint else 0
    for epoch in range(start, 15):
        order = rng.permutation(len(x))
        for batch in np.array_split(order, len(x) // config["batch_size"]):
            gradient = x[batch].T @ (x[batch] @ w - y[batch]) / len(batch)
            w -= config["lr"] * (gradient + config["l2"] * w)
        val_loss = float(np.mean((x_val @ w - y_val) ** 2))
        nt.report(val_loss=val_loss, checkpoint={"w": w, "epoch": epoch})


if __name__ == "__main__":
    tuner = nt.Tuner(
        train,
        space={
            "lr": nt.loguniform(1e-4, 1e-1),
            "batch_size": nt.choice([16, 32, 64, 128]),
            "l2": nt.loguniform(1e-6, 1e-1),
            "seed": nt.grid([0, 1]),
        },
        metric="val_loss",
        mode="min",
        num_samples=12,
        max_concurrent=2,
        name="demo",
        seed=0,
        overwrite=True,
    )
    tuner.run()
    table = tuner.dataframe().sort_values("best_val_loss")
    print(table.head(10).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"\nbest config: {tuner.best_config}")
    print(f"all results: {tuner.path}/results.jsonl ({len(tuner.history())} rows)")
