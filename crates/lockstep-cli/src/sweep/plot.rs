//! The plots of `lockstep sweep`: every seed's loss curve with the mean ± one standard
//! deviation, and the final accuracies; drawn as SVG and PNG with an embedded font.

use super::{Run, SweepError, SweepReport};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

pub(super) const PLOT_SIZE: (u32, u32) = (960, 560);

/// The two plots, each drawn once as SVG and once as PNG.
#[derive(Clone, Copy)]
pub(super) enum Plot {
    LossCurves,
    FinalAccuracy,
}

impl Plot {
    pub(super) fn name(self) -> &'static str {
        match self {
            Plot::LossCurves => "loss_curves",
            Plot::FinalAccuracy => "final_accuracy",
        }
    }
    pub(super) fn draw<DB: DrawingBackend>(
        self,
        report: &SweepReport,
        area: DrawingArea<DB, Shift>,
        path: &Path,
    ) -> Result<(), SweepError> {
        match self {
            Plot::LossCurves => loss_curves(report, area, path),
            Plot::FinalAccuracy => final_accuracy(report, area, path),
        }
    }
}

/// DejaVu Sans (embedded from the `dejavu` crate) as plotters' "sans-serif": text in the PNG
/// needs a font file and none is looked up on the system.
pub(super) fn register_font() -> Result<(), SweepError> {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *OK.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .is_ok()
    });
    if ok { Ok(()) } else { Err(SweepError::Font) }
}

/// Per step: the mean over the runs that reached it and the sample std (0 with one run).
pub fn mean_curve(runs: &[Run]) -> Vec<(f64, f64)> {
    let len = runs.iter().map(|r| r.step_losses.len()).max().unwrap_or(0);
    (0..len)
        .map(|i| {
            let xs: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.step_losses.get(i).copied())
                .collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let std = if xs.len() >= 2 {
                (xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)).sqrt()
            } else {
                0.0
            };
            (mean, std)
        })
        .collect()
}

fn finite_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo {
        0.05 * (hi - lo)
    } else {
        0.05 * lo.abs().max(1e-3)
    };
    (lo - pad, hi + pad)
}

fn loss_curves<DB: DrawingBackend>(
    report: &SweepReport,
    root: DrawingArea<DB, Shift>,
    path: &Path,
) -> Result<(), SweepError> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| SweepError::Plot {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    root.fill(&WHITE).map_err(e)?;
    let curve = mean_curve(&report.runs);
    let steps = curve.len().max(2);
    let (lo, hi) = finite_range(
        report
            .runs
            .iter()
            .flat_map(|r| r.step_losses.iter().copied())
            .chain(curve.iter().flat_map(|(m, s)| [m - s, m + s])),
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Training loss per step, {} seeds: each seed, mean and mean ± std",
                report.runs.len()
            ),
            ("sans-serif", 22),
        )
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(1f64..steps as f64, lo..hi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("loss")
        .x_labels(steps.min(12))
        .x_label_formatter(&|x: &f64| {
            if (x - x.round()).abs() < 1e-9 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    let band: Vec<(f64, f64)> = curve
        .iter()
        .enumerate()
        .map(|(i, (m, s))| (i as f64 + 1.0, m + s))
        .chain(
            curve
                .iter()
                .enumerate()
                .rev()
                .map(|(i, (m, s))| (i as f64 + 1.0, m - s)),
        )
        .collect();
    chart
        .draw_series(std::iter::once(Polygon::new(band, BLUE.mix(0.18).filled())))
        .map_err(e)?
        .label("mean ± std")
        .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], BLUE.mix(0.18).filled()));
    for (k, r) in report.runs.iter().enumerate() {
        let color = Palette99::pick(k).mix(0.8);
        let s = chart
            .draw_series(LineSeries::new(
                r.step_losses
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (i as f64 + 1.0, *l)),
                color.stroke_width(2),
            ))
            .map_err(e)?;
        if k == 0 {
            s.label("each seed").legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 20, y)], Palette99::pick(0).stroke_width(2))
            });
        }
    }
    chart
        .draw_series(LineSeries::new(
            curve
                .iter()
                .enumerate()
                .map(|(i, (m, _))| (i as f64 + 1.0, *m)),
            BLACK.stroke_width(3),
        ))
        .map_err(e)?
        .label("mean")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(3)));
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

fn final_accuracy<DB: DrawingBackend>(
    report: &SweepReport,
    root: DrawingArea<DB, Shift>,
    path: &Path,
) -> Result<(), SweepError> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| SweepError::Plot {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    root.fill(&WHITE).map_err(e)?;
    let st = &report.final_test_accuracy;
    let accs: Vec<f64> = report
        .runs
        .iter()
        .map(|r| r.final_test_accuracy() * 100.0)
        .collect();
    let t95 = [st.t95[0] * 100.0, st.t95[1] * 100.0];
    let (lo, hi) = finite_range(accs.iter().copied().chain(t95));
    let n = accs.len();
    let seeds = report.seeds.clone();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Final test accuracy per seed: mean {:.2} %, 95 % t-interval shaded",
                st.mean * 100.0
            ),
            ("sans-serif", 22),
        )
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, lo..hi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("seed")
        .y_desc("final test accuracy (%)")
        .x_labels(n.min(20) + 1)
        .x_label_formatter(&|x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-9 && i >= 0.0 && (i as usize) < seeds.len() {
                seeds[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    let x_end = n as f64 - 0.5;
    if t95.iter().all(|v| v.is_finite()) {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(-0.5, t95[0]), (x_end, t95[1])],
                BLUE.mix(0.15).filled(),
            )))
            .map_err(e)?
            .label("95 % t-interval of the mean")
            .legend(|(x, y)| {
                Rectangle::new([(x, y - 6), (x + 20, y + 6)], BLUE.mix(0.15).filled())
            });
    }
    chart
        .draw_series(LineSeries::new(
            [(-0.5, st.mean * 100.0), (x_end, st.mean * 100.0)],
            BLACK.stroke_width(2),
        ))
        .map_err(e)?
        .label("mean")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    chart
        .draw_series(
            accs.iter()
                .enumerate()
                .map(|(i, a)| Circle::new((i as f64, *a), 6, RED.filled())),
        )
        .map_err(e)?
        .label("seed's final accuracy")
        .legend(|(x, y)| Circle::new((x + 10, y), 5, RED.filled()));
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}
