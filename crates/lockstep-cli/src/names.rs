//! The named choices of `lockstep train` ([`Model`], [`Optimizer`], [`Scheduler`], [`Aug`],
//! [`Seeding`], [`Reduction`]): each name is written once, in its enum. clap parses the flags
//! into them and refuses any other name with the list of accepted ones; JSON reports and checkpoints store
//! [`as_str`](Model::as_str), the same strings as the flags (so files written before these
//! types existed still match).

/// An enum of flag values: the `clap::ValueEnum` names, `as_str`, `Display` (the name) and
/// `FromStr` (the name exactly, else [`lockstep::Error::Config`] listing the accepted ones).
macro_rules! names {
    (
        $(#[$meta:meta])*
        $name:ident, $flag:literal {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
        pub enum $name {
            $($(#[$vmeta])* #[value(name = $text)] $variant,)+
        }

        impl $name {
            /// The flag's name for it, as reports and checkpoints store it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }

            /// Every accepted name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = lockstep::Error;
            fn from_str(s: &str) -> lockstep::Result<Self> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(lockstep::Error::config(format!(
                        "invalid value {s:?} for --{}: one of {}",
                        $flag,
                        Self::NAMES.join(", ")
                    ))),
                }
            }
        }
    };
}

names! {
    /// `--model`: the network trained (`gpt` by the `gpt` module, the others by `train`).
    Model, "model" {
        /// torch_train.py's multilayer perceptron.
        Mlp = "mlp",
        /// torch_train.py's convolutional network.
        Cnn = "cnn",
        /// torch_train.py's two-layer LSTM over the image's rows.
        Lstm = "lstm",
        /// torch_gpt.py's character-level transformer.
        Gpt = "gpt",
    }
}

names! {
    /// `--optimizer`.
    Optimizer, "optimizer" {
        /// `torch.optim.SGD` (momentum, Nesterov, L2 weight decay).
        Sgd = "sgd",
        /// `torch.optim.Adam` (L2 weight decay).
        Adam = "adam",
        /// `torch.optim.AdamW` (decoupled weight decay).
        AdamW = "adamw",
    }
}

names! {
    /// `--scheduler`: the learning-rate schedule, stepped once per epoch.
    Scheduler, "scheduler" {
        /// A constant learning rate.
        None = "none",
        /// `StepLR(step_size = max(1, epochs / 3), gamma = 0.1)`.
        Step = "step",
        /// `CosineAnnealingLR(T_max = epochs, eta_min = 0)`.
        Cosine = "cosine",
    }
}

names! {
    /// `--aug`: where the per-sample noise comes from.
    Aug, "aug" {
        /// No noise.
        None = "none",
        /// `torch.randn(64)` from the fetching worker's generator (the default generator
        /// without workers).
        Torch = "torch",
        /// `np.random.normal` from NumPy's global `RandomState`, seeded per worker.
        Numpy = "numpy",
    }
}

names! {
    /// `--seeding`: PyTorch's draws, or every draw keyed by the sample.
    Seeding, "seeding" {
        /// PyTorch's draws (the default generator, the loader's, per-worker seeds).
        Torch = "torch",
        /// Per-sample streams and fixed micro-shard sums: results independent of workers,
        /// threads and processes.
        Invariant = "invariant",
    }
}

names! {
    /// `--reduction` of `train --distributed`: how the micro-shards' gradients are summed
    /// across processes; both give the same bits.
    Reduction, "reduction" {
        /// Every process gathers every micro-shard's whole vector and adds them all in the
        /// fixed tree: ≈ `4·G·P` bytes received per process and step.
        Gather = "gather",
        /// Process `j` receives chunk `j` (`≈ P/W` floats) of every micro-shard's vector
        /// (all-to-all), adds them in the same fixed tree, and an all-gather of the summed
        /// chunks gives everyone the whole sum: ≈ `4·P·(G/W + 1)` bytes received per process
        /// and step.
        ReduceScatter = "reduce-scatter",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// `as_str`, `FromStr` and clap's names are one list: every variant round-trips.
    fn round_trips<T: ValueEnum + std::str::FromStr + std::fmt::Display + PartialEq + Copy>(
        names: &[&str],
    ) where
        <T as std::str::FromStr>::Err: std::fmt::Debug,
    {
        let vs = T::value_variants();
        assert_eq!(vs.len(), names.len());
        for (v, n) in vs.iter().zip(names) {
            assert_eq!(v.to_string(), *n);
            assert_eq!(v.to_possible_value().unwrap().get_name(), *n);
            assert!(n.parse::<T>().unwrap() == *v);
        }
    }

    #[test]
    fn names_are_the_flags_strings() {
        round_trips::<Model>(&["mlp", "cnn", "lstm", "gpt"]);
        round_trips::<Optimizer>(&["sgd", "adam", "adamw"]);
        round_trips::<Scheduler>(&["none", "step", "cosine"]);
        round_trips::<Aug>(&["none", "torch", "numpy"]);
        round_trips::<Seeding>(&["torch", "invariant"]);
        round_trips::<Reduction>(&["gather", "reduce-scatter"]);
        let e = "resnet".parse::<Model>().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid value \"resnet\" for --model: one of mlp, cnn, lstm, gpt"
        );
        assert!("Adam".parse::<Optimizer>().is_err());
    }
}
