//! Modules declared once: names, order, modes and tying follow from one `visit` listing.
//!
//! The trees of `tests/golden/train/module_tree.json` (written by
//! `tools/golden_module_tree.py` with real PyTorch) are rebuilt here in the same construction
//! order: `state_dict`, `named_parameters`, `named_buffers` and the submodule names must be
//! PyTorch's, and the parameters' bits (sha256 over `parameters()`) too.

use lockstep_nn::layers::{BatchNorm, Dropout, Embedding, LayerNorm, Linear, ReLU, Sequential};
use lockstep_nn::module::{Forward, Module, ModuleDict, ModuleList, Training, Visitor};
use lockstep_nn::{Result, Var};
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::{Mutex, MutexGuard};

/// The tests that draw from the default generator run one at a time.
fn seeded(seed: u64) -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    lockstep_rng::default_generator().manual_seed(seed);
    g
}

const D: usize = 8;
const VOCAB: usize = 11;
const CTX: usize = 5;

struct Attn {
    c_attn: Linear,
    c_proj: Linear,
    training: Training,
}

impl Module for Attn {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("c_attn", &self.c_attn);
        v.child("c_proj", &self.c_proj);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

struct Mlp {
    c_fc: Linear,
    c_proj: Linear,
    training: Training,
}

impl Module for Mlp {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("c_fc", &self.c_fc);
        v.child("c_proj", &self.c_proj);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

struct Block {
    ln_1: LayerNorm,
    attn: Attn,
    ln_2: LayerNorm,
    mlp: Mlp,
    drop: Dropout,
    training: Training,
}

impl Block {
    fn new() -> Result<Self> {
        Ok(Self {
            ln_1: LayerNorm::new(&[D], true)?,
            attn: Attn {
                c_attn: Linear::new(D, 3 * D, true)?,
                c_proj: Linear::new(D, D, true)?,
                training: Training::default(),
            },
            ln_2: LayerNorm::new(&[D], true)?,
            mlp: Mlp {
                c_fc: Linear::new(D, 4 * D, true)?,
                c_proj: Linear::new(4 * D, D, true)?,
                training: Training::default(),
            },
            drop: Dropout::new(0.1)?,
            training: Training::default(),
        })
    }
}

impl Module for Block {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("ln_1", &self.ln_1);
        v.child("attn", &self.attn);
        v.child("ln_2", &self.ln_2);
        v.child("mlp", &self.mlp);
        v.child("drop", &self.drop);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// GPT-2's shape, with `lm_head.weight` tied to `wte.weight`.
struct Gpt {
    wte: Embedding,
    wpe: Embedding,
    drop: Dropout,
    h: ModuleList<Block>,
    ln_f: LayerNorm,
    lm_head: Linear,
    training: Training,
}

impl Gpt {
    fn new() -> Result<Self> {
        let wte = Embedding::new(VOCAB, D, None)?;
        let wpe = Embedding::new(CTX, D, None)?;
        let drop = Dropout::new(0.1)?;
        let h = (0..2).map(|_| Block::new()).collect::<Result<_>>()?;
        let ln_f = LayerNorm::new(&[D], true)?;
        let mut lm_head = Linear::new(D, VOCAB, false)?;
        lm_head.weight = wte.weight.clone();
        Ok(Self {
            wte,
            wpe,
            drop,
            h,
            ln_f,
            lm_head,
            training: Training::default(),
        })
    }
}

impl Module for Gpt {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("wte", &self.wte);
        v.child("wpe", &self.wpe);
        v.child("drop", &self.drop);
        v.child("h", &self.h);
        v.child("ln_f", &self.ln_f);
        v.child("lm_head", &self.lm_head);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// Lists a child before its own parameters and buffer: the order must still be PyTorch's.
struct Order {
    inner: BatchNorm,
    scale: Var,
    count: Var,
    shift: Var,
    training: Training,
}

impl Module for Order {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("inner", &self.inner);
        v.param("scale", &self.scale);
        v.buffer("count", &self.count);
        v.param("shift", &self.shift);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

struct Containers {
    seq: Sequential,
    layers: ModuleList<Linear>,
    heads: ModuleDict<Linear>,
    training: Training,
}

impl Containers {
    fn new() -> Result<Self> {
        let seq = Sequential::new()
            .add(Linear::new(3, 4, true)?)
            .add(
                Sequential::new()
                    .add(BatchNorm::new_1d(4)?)
                    .add(ReLU::default())
                    .add(Dropout::new(0.5)?),
            )
            .add(Linear::new(4, 2, true)?);
        let layers = (0..4)
            .map(|_| Linear::new(2, 2, true))
            .collect::<Result<_>>()?;
        let mut heads = ModuleDict::new();
        heads.insert("b", Linear::new(2, 1, true)?)?;
        heads.insert("a", Linear::new(2, 1, true)?)?;
        heads.insert("b", Linear::new(2, 3, true)?)?;
        Ok(Self {
            seq,
            layers,
            heads,
            training: Training::default(),
        })
    }
}

impl Module for Containers {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("seq", &self.seq);
        v.child("layers", &self.layers);
        v.child("heads", &self.heads);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

fn golden() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/golden/train/module_tree.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect(path)).expect("json")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|s| s.as_str().expect("string").to_string())
        .collect()
}

fn submodule_names(m: &dyn Module) -> Vec<String> {
    let mut names = Vec::new();
    m.for_each_submodule(&mut |name, _| names.push(name.to_string()));
    names
}

fn sha256_of(params: &[Var]) -> String {
    let mut h = Sha256::new();
    for p in params {
        for x in p.data().contiguous().to_vec::<f32>().unwrap() {
            h.update(x.to_le_bytes());
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn names_order_and_bits_are_pytorchs() {
    let g = golden();
    for case in g["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let m: Box<dyn Module> = {
            let _seed = seeded(0);
            match name {
                "gpt" => Box::new(Gpt::new().unwrap()),
                "order" => Box::new(Order {
                    inner: BatchNorm::new_1d(2).unwrap(),
                    scale: Var::new(Tensor::ones(&[2], DType::F32).unwrap(), true),
                    count: Var::constant(Tensor::zeros(&[1], DType::F32).unwrap()),
                    shift: Var::new(Tensor::zeros(&[2], DType::F32).unwrap(), true),
                    training: Training::default(),
                }),
                "containers" => Box::new(Containers::new().unwrap()),
                other => panic!("unknown case {other}"),
            }
        };
        let sd: Vec<String> = m.state_dict().into_iter().map(|(k, _)| k).collect();
        assert_eq!(sd, strings(&case["state_dict"]), "{name}: state_dict");
        let np: Vec<String> = m.named_parameters().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            np,
            strings(&case["named_parameters"]),
            "{name}: named_parameters"
        );
        let nb: Vec<String> = m.named_buffers().into_iter().map(|(k, _)| k).collect();
        assert_eq!(nb, strings(&case["named_buffers"]), "{name}: named_buffers");
        assert_eq!(
            submodule_names(&*m),
            strings(&case["named_modules"]),
            "{name}: named_modules"
        );
        let params = m.parameters();
        assert_eq!(
            params.len() as u64,
            case["num_parameters"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            sha256_of(&params),
            case["parameters_sha256"].as_str().unwrap(),
            "{name}: parameters' bits"
        );
    }
}

#[test]
fn eval_reaches_dropout_in_nested_containers() {
    let _seed = seeded(1);
    let mut m = Containers::new().unwrap();
    let mut gpt = Gpt::new().unwrap();
    let mut block = Block::new().unwrap();
    drop(_seed);
    m.eval();
    gpt.eval();
    for model in [&m as &dyn Module, &gpt] {
        assert!(!model.is_training());
        model.for_each_submodule(&mut |name, sub| {
            assert!(!sub.is_training(), "{name} still in training mode");
        });
    }
    // The dropout two containers down is the identity now: no draws, no zeros.
    let x = Var::constant(Tensor::ones(&[3, 3], DType::F32).unwrap());
    let y = m.seq.forward(&x).unwrap();
    let again = m.seq.forward(&x).unwrap();
    assert_eq!(
        y.data().to_vec::<f32>().unwrap(),
        again.data().to_vec::<f32>().unwrap()
    );
    m.train(true);
    let mut modes = Vec::new();
    m.for_each_submodule(&mut |_, sub| modes.push(sub.is_training()));
    assert!(m.is_training() && modes.iter().all(|&t| t));
    // A part switched alone switches everything under it and nothing else.
    gpt.h.iter().for_each(|b| assert!(!b.is_training()));
    block.eval();
    assert!(!block.drop.is_training() && !block.attn.c_attn.is_training());
    block.attn.train(true);
    assert!(block.attn.c_proj.is_training() && !block.is_training() && !block.mlp.is_training());
}

#[test]
fn a_tied_weight_is_one_parameter_under_two_names() {
    let _seed = seeded(2);
    let gpt = Gpt::new().unwrap();
    drop(_seed);
    assert!(gpt.lm_head.weight.same(&gpt.wte.weight));
    let sd = gpt.state_dict();
    let names: Vec<&str> = sd.iter().map(|(k, _)| k.as_str()).collect();
    assert!(names.contains(&"wte.weight") && names.contains(&"lm_head.weight"));
    let params = gpt.parameters();
    assert_eq!(params.iter().filter(|p| p.same(&gpt.wte.weight)).count(), 1);
    // The tied tensor keeps its first name.
    assert!(
        gpt.named_parameters()
            .iter()
            .any(|(k, p)| k == "wte.weight" && p.same(&gpt.lm_head.weight))
    );
    // Strict loading needs both names; the value reaches the one tensor.
    let mut state = sd.clone();
    state.retain(|(k, _)| k != "lm_head.weight");
    let e = gpt.load_state_dict(&state).unwrap_err().to_string();
    assert!(e.contains("Missing key(s): [\"lm_head.weight\"]"), "{e}");
    let fives = Tensor::full(&[VOCAB, D], 5.0, DType::F32).unwrap();
    let state: Vec<(String, Tensor)> = sd
        .into_iter()
        .map(|(k, t)| {
            if k == "wte.weight" || k == "lm_head.weight" {
                (k, fives.clone())
            } else {
                (k, t)
            }
        })
        .collect();
    gpt.load_state_dict(&state).unwrap();
    assert_eq!(
        gpt.lm_head.weight.data().to_vec::<f32>().unwrap(),
        vec![5.0; VOCAB * D]
    );
    // Converting the dtype converts the one tensor once, and both names see it.
    gpt.to_dtype(DType::F64).unwrap();
    assert_eq!(gpt.wte.weight.dtype(), DType::F64);
    assert_eq!(gpt.lm_head.weight.dtype(), DType::F64);
}

#[test]
fn containers_number_their_children() {
    let _seed = seeded(3);
    let mut list: ModuleList = ModuleList::new();
    list.push(Box::new(Linear::new(2, 2, false).unwrap()));
    list.push(Box::new(ReLU::default()));
    list.push(Box::new(Linear::new(2, 1, true).unwrap()));
    drop(_seed);
    let names: Vec<String> = list.state_dict().into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, ["0.weight", "2.weight", "2.bias"]);
    assert_eq!(list.len(), 3);
    let mut dict: ModuleDict<ReLU> = ModuleDict::new();
    for bad in ["", "a.b"] {
        let e = dict.insert(bad, ReLU::default()).unwrap_err().to_string();
        assert!(
            e.contains("ModuleDict::insert") && e.contains("name"),
            "{e}"
        );
    }
    dict.insert("z", ReLU::default()).unwrap();
    dict.insert("y", ReLU::default()).unwrap();
    dict.insert("z", ReLU::default()).unwrap();
    let keys: Vec<&str> = dict.iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["z", "y"]);
    assert_eq!(submodule_names(&dict), ["z", "y"]);
}

/// `forward(x, h) -> (y, h')`: a module with two inputs and two outputs.
struct Cell {
    ih: Linear,
    hh: Linear,
    drop: Dropout,
    training: Training,
}

impl Module for Cell {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("ih", &self.ih);
        v.child("hh", &self.hh);
        v.child("drop", &self.drop);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

impl Cell {
    fn forward(&self, x: &Var, h: &Var) -> Result<(Var, Var)> {
        let h2 = self.ih.forward(x)?.add(&self.hh.forward(h)?)?.tanh()?;
        Ok((self.drop.forward(&h2)?, h2))
    }
}

#[test]
fn a_two_input_module_is_a_module() {
    let _seed = seeded(4);
    let mut cells: ModuleList<Cell> = (0..2)
        .map(|_| {
            Ok(Cell {
                ih: Linear::new(3, 4, true)?,
                hh: Linear::new(4, 4, false)?,
                drop: Dropout::new(0.5)?,
                training: Training::default(),
            })
        })
        .collect::<Result<_>>()
        .unwrap();
    drop(_seed);
    let names: Vec<String> = cells
        .named_parameters()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        names,
        [
            "0.ih.weight",
            "0.ih.bias",
            "0.hh.weight",
            "1.ih.weight",
            "1.ih.bias",
            "1.hh.weight"
        ]
    );
    cells.eval();
    let x = Var::constant(Tensor::ones(&[2, 3], DType::F32).unwrap());
    let mut h = Var::constant(Tensor::zeros(&[2, 4], DType::F32).unwrap());
    let mut loss = None;
    for cell in &cells {
        let (y, h2) = cell.forward(&x, &h).unwrap();
        // In eval the dropout is the identity: y is h'.
        assert_eq!(
            y.data().to_vec::<f32>().unwrap(),
            h2.data().to_vec::<f32>().unwrap()
        );
        h = h2;
        loss = Some(y.sum().unwrap());
    }
    loss.unwrap().backward().unwrap();
    for (k, p) in cells.named_parameters() {
        assert!(p.grad().is_some(), "{k} has no gradient");
    }
    cells.zero_grad();
    assert!(cells.parameters().iter().all(|p| p.grad().is_none()));
}

#[test]
fn load_state_dict_is_strict_and_all_or_nothing() {
    let _seed = seeded(5);
    let m = Containers::new().unwrap();
    drop(_seed);
    let sd = m.state_dict();
    let before: Vec<Vec<f32>> = m
        .parameters()
        .iter()
        .map(|p| p.data().to_vec::<f32>().unwrap())
        .collect();
    // Missing and unexpected keys, named.
    let mut state = sd.clone();
    state.retain(|(k, _)| k != "layers.3.bias");
    state.push((
        "layers.4.bias".into(),
        Tensor::zeros(&[2], DType::F32).unwrap(),
    ));
    let e = m.load_state_dict(&state).unwrap_err().to_string();
    assert!(
        e.contains("load_state_dict")
            && e.contains("Missing key(s): [\"layers.3.bias\"]")
            && e.contains("Unexpected key(s): [\"layers.4.bias\"]"),
        "{e}"
    );
    // A shape mismatch, named; nothing changed even for the keys before it.
    let state: Vec<(String, Tensor)> = sd
        .iter()
        .map(|(k, t)| {
            if k == "heads.b.weight" {
                (k.clone(), Tensor::zeros(&[1, 2], DType::F32).unwrap())
            } else {
                (k.clone(), Tensor::zeros(t.shape(), t.dtype()).unwrap())
            }
        })
        .collect();
    let e = m.load_state_dict(&state).unwrap_err().to_string();
    assert!(
        e.contains("size mismatch for heads.b.weight")
            && e.contains("[1, 2]")
            && e.contains("[3, 2]"),
        "{e}"
    );
    let after: Vec<Vec<f32>> = m
        .parameters()
        .iter()
        .map(|p| p.data().to_vec::<f32>().unwrap())
        .collect();
    assert_eq!(before, after);
    m.load_state_dict(&sd).unwrap();
}
