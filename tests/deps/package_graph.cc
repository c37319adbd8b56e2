// File: tests/deps/package_graph.cc
#include "tests/deps/package_graph.h"

#include <algorithm>
#include <functional>
#include <sstream>

namespace fsdp_tests {

std::string PackageOf(const std::string& label) {
  if (label.rfind("//", 0) != 0) return "";
  const size_t colon = label.find(':');
  return colon == std::string::npos ? label : label.substr(0, colon);
}

namespace {

// The quoted labels of one line, in order: `"//a:x" -> "//b:y"` gives both,
// a node line gives one.
std::vector<std::string> QuotedLabels(const std::string& line) {
  std::vector<std::string> labels;
  size_t pos = 0;
  while (true) {
    const size_t open = line.find('"', pos);
    if (open == std::string::npos) break;
    const size_t close = line.find('"', open + 1);
    if (close == std::string::npos) break;
    labels.push_back(line.substr(open + 1, close - open - 1));
    pos = close + 1;
  }
  return labels;
}

}  // namespace

PackageGraph PackageGraphFromQueryGraph(const std::string& query_graph) {
  PackageGraph graph;
  std::istringstream lines(query_graph);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("->") == std::string::npos) continue;
    const std::vector<std::string> labels = QuotedLabels(line);
    if (labels.size() != 2) continue;
    const std::string from = PackageOf(labels[0]);
    const std::string to = PackageOf(labels[1]);
    if (from.empty() || to.empty()) continue;
    graph[from];
    graph[to];
    if (from != to) graph[from].insert(to);
  }
  return graph;
}

std::vector<std::vector<std::string>> PackageCycles(const PackageGraph& graph) {
  // Tarjan's strongly connected components, then one cycle through each
  // component of two or more packages by a walk that stays inside it.
  std::map<std::string, int> index, low;
  std::set<std::string> on_stack;
  std::vector<std::string> stack;
  std::vector<std::set<std::string>> components;
  int next_index = 0;
  std::function<void(const std::string&)> visit = [&](const std::string& v) {
    index[v] = low[v] = next_index++;
    stack.push_back(v);
    on_stack.insert(v);
    auto it = graph.find(v);
    if (it != graph.end()) {
      for (const std::string& w : it->second) {
        if (index.count(w) == 0) {
          visit(w);
          low[v] = std::min(low[v], low[w]);
        } else if (on_stack.count(w) != 0) {
          low[v] = std::min(low[v], index[w]);
        }
      }
    }
    if (low[v] == index[v]) {
      std::set<std::string> component;
      std::string w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack.erase(w);
        component.insert(w);
      } while (w != v);
      if (component.size() > 1) components.push_back(component);
    }
  };
  for (const auto& [package, deps] : graph) {
    if (index.count(package) == 0) visit(package);
  }

  std::vector<std::vector<std::string>> cycles;
  for (const std::set<std::string>& component : components) {
    // Breadth-first from the smallest package back to itself, inside the
    // component: the shortest cycle through it.
    const std::string& start = *component.begin();
    std::map<std::string, std::string> parent;
    std::vector<std::string> frontier = {start};
    std::string last;
    while (!frontier.empty() && last.empty()) {
      std::vector<std::string> next;
      for (const std::string& v : frontier) {
        for (const std::string& w : graph.at(v)) {
          if (component.count(w) == 0) continue;
          if (w == start) {
            last = v;
            break;
          }
          if (parent.count(w) == 0) {
            parent[w] = v;
            next.push_back(w);
          }
        }
        if (!last.empty()) break;
      }
      frontier = std::move(next);
    }
    std::vector<std::string> cycle = {start};
    for (std::string v = last; v != start; v = parent.at(v)) cycle.push_back(v);
    std::reverse(cycle.begin() + 1, cycle.end());
    cycle.push_back(start);
    cycles.push_back(cycle);
  }
  std::sort(cycles.begin(), cycles.end());
  return cycles;
}

std::string CycleToString(const std::vector<std::string>& cycle) {
  std::string text;
  for (const std::string& package : cycle) {
    if (!text.empty()) text += " -> ";
    text += package;
  }
  return text;
}

}  // namespace fsdp_tests
