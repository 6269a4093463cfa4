"""nbtune inside the libraries users train with: import the module of yours.

    nbtune.integrations.xgboost     ReportCallback, resume_kwargs     (nbtune[xgboost])
    nbtune.integrations.lightgbm    ReportCallback, resume_kwargs     (nbtune[lightgbm])
    nbtune.integrations.mlflow      MLflowLogger                      (nbtune[mlflow])
    nbtune.integrations.tensorboard TensorBoardLogger                 (nbtune[tensorboard])
    nbtune.integrations.keras       ReportCallback, resume_kwargs     (nbtune[keras])
    nbtune.integrations.lightning   ReportCallback, resume_kwargs     (nbtune[lightning])
    nbtune.integrations.catboost    ReportCallback, resume_kwargs     (nbtune[catboost])
    nbtune.integrations.wandb       WandbLogger                       (nbtune[wandb])
    nbtune.integrations.transformers ReportCallback, resume_kwargs    (nbtune[transformers])

Each module imports its library, so this package imports none of them: `import nbtune` stays
light, and a missing library is an error only where it is used.
"""
