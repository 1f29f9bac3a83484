//! A small min-cost flow solver (successive shortest paths with potentials, each phase a
//! blocking flow over the edges of reduced cost zero), for the reassignment proposal in
//! `reassign.rs`. Costs are `i128` so that the proposal can rank its goals by orders of
//! magnitude without overflow.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Debug, Clone)]
struct Edge {
    to: usize,
    cap: i64,
    cost: i128,
}

/// A flow network; edge `2k` is an edge added with [`MinCostFlow::add_edge`], `2k + 1` its
/// residual.
#[derive(Debug, Default)]
pub(crate) struct MinCostFlow {
    adjacent: Vec<Vec<usize>>,
    edges: Vec<Edge>,
}

impl MinCostFlow {
    /// A network of `nodes` nodes and no edges.
    pub(crate) fn new(nodes: usize) -> Self {
        MinCostFlow {
            adjacent: vec![Vec::new(); nodes],
            edges: Vec::new(),
        }
    }

    /// Adds `from -> to` with capacity `cap` at `cost` per unit; returns its id for
    /// [`MinCostFlow::flow_on`].
    pub(crate) fn add_edge(&mut self, from: usize, to: usize, cap: i64, cost: i128) -> usize {
        let id = self.edges.len();
        self.edges.push(Edge { to, cap, cost });
        self.edges.push(Edge {
            to: from,
            cap: 0,
            cost: -cost,
        });
        self.adjacent[from].push(id);
        self.adjacent[to].push(id + 1);
        id
    }

    /// The flow on edge `id` after [`MinCostFlow::run`].
    pub(crate) fn flow_on(&self, id: usize) -> i64 {
        self.edges[id + 1].cap
    }

    /// Sends up to `limit` units from `source` to `sink` at the least total cost (negative
    /// costs allowed; the network must have no negative cycle); returns the flow sent.
    pub(crate) fn run(&mut self, source: usize, sink: usize, limit: i64) -> i64 {
        let n = self.adjacent.len();
        let Some(mut potential) = self.bellman_ford(source) else {
            return 0;
        };
        let mut sent = 0;
        while sent < limit {
            // Dijkstra over reduced costs (all >= 0 under the potentials).
            let mut dist: Vec<Option<i128>> = vec![None; n];
            dist[source] = Some(0);
            let mut heap = BinaryHeap::from([Reverse((0i128, source))]);
            while let Some(Reverse((d, v))) = heap.pop() {
                if dist[v] != Some(d) {
                    continue;
                }
                for &e in &self.adjacent[v] {
                    let edge = &self.edges[e];
                    if edge.cap == 0 {
                        continue;
                    }
                    let Some(pt) = potential[edge.to] else {
                        continue;
                    };
                    let reduced = edge.cost + potential[v].unwrap_or(0) - pt;
                    let nd = d + reduced;
                    if dist[edge.to].is_none_or(|old| nd < old) {
                        dist[edge.to] = Some(nd);
                        heap.push(Reverse((nd, edge.to)));
                    }
                }
            }
            if dist[sink].is_none() {
                break;
            }
            // Nodes Dijkstra did not reach move by the largest distance, which keeps every
            // reduced cost into a reached node non-negative.
            let farthest = dist.iter().flatten().copied().max().unwrap_or(0);
            for (p, d) in potential.iter_mut().zip(&dist) {
                if let Some(p) = p.as_mut() {
                    *p += d.unwrap_or(farthest);
                }
            }
            // Blocking flow over the admissible edges (reduced cost zero).
            while let Some(level) = self.admissible_levels(source, sink, &potential) {
                let mut next = vec![0usize; n];
                loop {
                    let pushed =
                        self.push(source, sink, limit - sent, &potential, &level, &mut next);
                    if pushed == 0 {
                        break;
                    }
                    sent += pushed;
                    if sent == limit {
                        return sent;
                    }
                }
            }
        }
        sent
    }

    fn admissible(&self, v: usize, e: usize, potential: &[Option<i128>]) -> bool {
        let edge = &self.edges[e];
        edge.cap > 0
            && match (potential[v], potential[edge.to]) {
                (Some(pv), Some(pt)) => edge.cost + pv - pt == 0,
                _ => false,
            }
    }

    fn admissible_levels(
        &self,
        source: usize,
        sink: usize,
        potential: &[Option<i128>],
    ) -> Option<Vec<usize>> {
        let mut level = vec![usize::MAX; self.adjacent.len()];
        level[source] = 0;
        let mut queue = VecDeque::from([source]);
        while let Some(v) = queue.pop_front() {
            for &e in &self.adjacent[v] {
                let to = self.edges[e].to;
                if level[to] == usize::MAX && self.admissible(v, e, potential) {
                    level[to] = level[v] + 1;
                    queue.push_back(to);
                }
            }
        }
        (level[sink] != usize::MAX).then_some(level)
    }

    /// One augmenting path of the level graph (iterative DFS with current-arc pointers).
    fn push(
        &mut self,
        source: usize,
        sink: usize,
        limit: i64,
        potential: &[Option<i128>],
        level: &[usize],
        next: &mut [usize],
    ) -> i64 {
        let mut path: Vec<usize> = Vec::new();
        let mut v = source;
        loop {
            if v == sink {
                let amount = path
                    .iter()
                    .map(|&e| self.edges[e].cap)
                    .min()
                    .unwrap_or(0)
                    .min(limit);
                for &e in &path {
                    self.edges[e].cap -= amount;
                    self.edges[e ^ 1].cap += amount;
                }
                return amount;
            }
            let mut advanced = false;
            while next[v] < self.adjacent[v].len() {
                let e = self.adjacent[v][next[v]];
                let to = self.edges[e].to;
                if level[to] == level[v] + 1 && self.admissible(v, e, potential) {
                    path.push(e);
                    v = to;
                    advanced = true;
                    break;
                }
                next[v] += 1;
            }
            if !advanced {
                // Dead end: retreat and skip the edge that led here.
                let Some(e) = path.pop() else {
                    return 0;
                };
                v = self.edges[e ^ 1].to;
                next[v] += 1;
            }
        }
    }

    /// Shortest distances from `source` over edges with capacity (`None`: unreachable), or
    /// `None` on a negative cycle.
    fn bellman_ford(&self, source: usize) -> Option<Vec<Option<i128>>> {
        let n = self.adjacent.len();
        let mut dist: Vec<Option<i128>> = vec![None; n];
        let mut queued = vec![false; n];
        let mut relaxed = vec![0usize; n];
        dist[source] = Some(0);
        let mut queue = VecDeque::from([source]);
        queued[source] = true;
        while let Some(v) = queue.pop_front() {
            queued[v] = false;
            let dv = dist[v]?;
            for &e in &self.adjacent[v] {
                let edge = &self.edges[e];
                if edge.cap == 0 {
                    continue;
                }
                let nd = dv + edge.cost;
                if dist[edge.to].is_none_or(|old| nd < old) {
                    dist[edge.to] = Some(nd);
                    if !queued[edge.to] {
                        relaxed[edge.to] += 1;
                        if relaxed[edge.to] > n {
                            return None;
                        }
                        queued[edge.to] = true;
                        queue.push_back(edge.to);
                    }
                }
            }
        }
        Some(dist)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_cheapest_routes_and_honours_negative_costs() {
        // s=0, a=1, b=2, t=3: two units; a is cheap but carries one.
        let mut f = MinCostFlow::new(4);
        let sa = f.add_edge(0, 1, 1, 1);
        let sb = f.add_edge(0, 2, 2, 5);
        f.add_edge(1, 3, 5, 0);
        let bt = f.add_edge(2, 3, 5, -3);
        assert_eq!(f.run(0, 3, 2), 2);
        assert_eq!((f.flow_on(sa), f.flow_on(sb), f.flow_on(bt)), (1, 1, 1));
        // A detour that becomes cheaper through a residual edge.
        let mut f = MinCostFlow::new(4);
        let e01 = f.add_edge(0, 1, 1, 1);
        let e02 = f.add_edge(0, 2, 1, 2);
        let e12 = f.add_edge(1, 2, 1, 0);
        let e13 = f.add_edge(1, 3, 1, 5);
        let e23 = f.add_edge(2, 3, 1, 1);
        assert_eq!(f.run(0, 3, 5), 2);
        let cost = f.flow_on(e01) + 2 * f.flow_on(e02) + 5 * f.flow_on(e13) + f.flow_on(e23);
        assert_eq!(cost, 9);
        assert_eq!(f.flow_on(e12), 0);
    }
}
