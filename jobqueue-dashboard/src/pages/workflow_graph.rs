//! A workflow's graph drawn on the server, as SVG: each step a box in the
//! column of its depth (its longest path from a step without parents),
//! each edge a line from a parent's box to its child's, colored by the
//! step's state. No script: the page stays readable with scripts off.

use std::collections::HashMap;

use jobqueue_core::StepInfo;
use maud::{Markup, html};

/// Steps beyond which the graph is not drawn (the table still lists them).
pub(crate) const MOST_DRAWN: usize = 300;

const BOX_W: usize = 170;
const BOX_H: usize = 26;
const COL_GAP: usize = 60;
const ROW_GAP: usize = 10;
const MARGIN: usize = 10;
/// Characters of a step's name shown in its box.
const NAME_CHARS: usize = 22;

/// Each step's column, for steps given as `(name, the names of its
/// parents)`: 0 for a step without parents, else one more than its
/// deepest parent's. A parent's name that is no step (none should be)
/// counts as depth 0; steps in a cycle (none should be) get the depth
/// reached when the walk stops.
pub(crate) fn depths(steps: &[(&str, &[String])]) -> Vec<usize> {
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (*name, i))
        .collect();
    let mut depth = vec![0usize; steps.len()];
    // Relax until nothing changes: at most one pass per step.
    for _ in 0..steps.len() {
        let mut changed = false;
        for (i, (_, parents)) in steps.iter().enumerate() {
            let deepest = parents
                .iter()
                .filter_map(|name| index.get(name.as_str()))
                .map(|&p| depth[p] + 1)
                .max()
                .unwrap_or(0);
            if deepest > depth[i] {
                depth[i] = deepest;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    depth
}

/// The SVG of `steps` (at most [`MOST_DRAWN`]).
pub(crate) fn draw(steps: &[StepInfo]) -> Markup {
    let named: Vec<(&str, &[String])> = steps
        .iter()
        .map(|step| (step.name.as_str(), step.parents.as_slice()))
        .collect();
    let depth = depths(&named);
    let mut rows_used: HashMap<usize, usize> = HashMap::new();
    let mut at = Vec::with_capacity(steps.len());
    for &d in &depth {
        let row = rows_used.entry(d).or_insert(0);
        at.push((d, *row));
        *row += 1;
    }
    let columns = depth.iter().max().map_or(0, |d| d + 1);
    let rows = rows_used.values().max().copied().unwrap_or(0);
    let x = |col: usize| MARGIN + col * (BOX_W + COL_GAP);
    let y = |row: usize| MARGIN + row * (BOX_H + ROW_GAP);
    let width = x(columns) - COL_GAP + MARGIN;
    let height = y(rows) - ROW_GAP + MARGIN;
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, step)| (step.name.as_str(), i))
        .collect();
    let edges: Vec<(usize, usize)> = steps
        .iter()
        .enumerate()
        .flat_map(|(child, step)| {
            step.parents
                .iter()
                .filter_map(|name| index.get(name.as_str()).map(|&parent| (parent, child)))
                .collect::<Vec<_>>()
        })
        .collect();
    html! {
        svg.graph #workflow-graph xmlns="http://www.w3.org/2000/svg"
            width=(width) height=(height) viewBox={ "0 0 " (width) " " (height) }
            role="img" aria-label="the workflow's steps and the steps each comes after" {
            @for &(parent, child) in &edges {
                @let (pc, pr) = at[parent];
                @let (cc, cr) = at[child];
                line class={ "edge " (steps[parent].state) }
                    x1=(x(pc) + BOX_W) y1=(y(pr) + BOX_H / 2)
                    x2=(x(cc)) y2=(y(cr) + BOX_H / 2) {}
            }
            @for (i, step) in steps.iter().enumerate() {
                @let (col, row) = at[i];
                g.step data-step=(step.name) data-state=(step.state) {
                    title { (step.name) ": " (step.state) }
                    rect class=(step.state) x=(x(col)) y=(y(row)) width=(BOX_W) height=(BOX_H)
                        rx="4" {}
                    text x=(x(col) + 8) y=(y(row) + BOX_H / 2 + 4) { (short(&step.name)) }
                }
            }
        }
    }
}

/// A name cut to [`NAME_CHARS`] characters, with an ellipsis if cut.
fn short(name: &str) -> String {
    if name.chars().count() <= NAME_CHARS {
        return name.to_owned();
    }
    let mut cut: String = name.chars().take(NAME_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn a_step_sits_one_column_after_its_deepest_parent() {
        let (none, a, ab, c) = (names(&[]), names(&["a"]), names(&["a", "b"]), names(&["c"]));
        // d comes after c (depth 2) and is listed before it.
        let steps: Vec<(&str, &[String])> =
            vec![("d", &c), ("a", &none), ("b", &a), ("c", &ab), ("e", &none)];
        assert_eq!(depths(&steps), [3, 0, 1, 2, 0]);
    }

    #[test]
    fn long_names_are_cut() {
        assert_eq!(short("thumbnails"), "thumbnails");
        let cut = short("a-very-long-step-name-that-goes-on");
        assert_eq!(cut.chars().count(), NAME_CHARS);
        assert!(cut.ends_with('…'));
    }
}
