// The hyperparameters a Python optimizer stepped with, read back and compared
// (optimizer_settings.h). The recorder writes them as the name of a region of kind 3 whose
// parent is the step's region (docs/schema.md).
#include "tlparse/diff/optimizer_settings.h"

#include <algorithm>
#include <set>
#include <string>

namespace tdbg::diff {

using nlohmann::json;
using tracer::Reader;

json optimizer_settings_at(const Reader& reader, StepAt at) {
  const std::string seq = std::to_string(at.seq);
  json settings;
  (void)reader.query(
      "SELECT s.text FROM regions o JOIN regions r ON o.parent = r.id JOIN strings s ON s.id = "
      "o.name WHERE o.kind = 3 AND r.kind = 1 AND r.thread = " +
          std::to_string(at.thread) + " AND r.start_seq <= " + seq +
          " AND (r.end_seq IS NULL OR r.end_seq >= " + seq + ") ORDER BY r.start_seq DESC LIMIT 1",
      [&](const std::vector<std::string>& row) {
        json parsed = json::parse(row[0], nullptr, /*allow_exceptions=*/false);
        if (parsed.is_object() && parsed.value("optimizer", json()).is_string() &&
            parsed.value("groups", json()).is_array())
          settings = std::move(parsed);
        return false;
      });
  return settings;
}

namespace {

// How many optimizers the process stepped (the largest index recorded), or 0 where unknown.
int optimizer_count(const Reader& reader) {
  int count = 0;
  (void)reader.query(
      "SELECT MAX(json_extract(s.text, '$.index')) FROM regions o JOIN strings s ON s.id = o.name "
      "WHERE o.kind = 3",
      [&](const std::vector<std::string>& row) {
        count = row[0].empty() ? 0 : std::atoi(row[0].c_str());
        return false;
      });
  return count;
}

// "Adam", or "Adam (optimizer 2 of 2)" where the run steps several.
std::string optimizer_name(const json& who) {
  std::string name = who.value("optimizer", std::string("the optimizer"));
  const int index = who.value("index", 0), count = who.value("count", 0);
  if (count > 1 && index > 0)
    name += " (optimizer " + std::to_string(index) + " of " + std::to_string(count) + ")";
  return name;
}

// As Python writes it (True, None), the optimizer's settings being Python values.
std::string value_text(const json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

json compare_optimizer_settings(const Reader& ra, StepAt a, const Reader& rb, StepAt b) {
  const json sa = optimizer_settings_at(ra, a), sb = optimizer_settings_at(rb, b);
  if (sa.is_null() || sb.is_null()) return nullptr;
  json who_a = {{"optimizer", sa["optimizer"]},
                {"index", sa.value("index", 0)},
                {"count", optimizer_count(ra)}};
  json who_b = {{"optimizer", sb["optimizer"]},
                {"index", sb.value("index", 0)},
                {"count", optimizer_count(rb)}};
  json differs = json::array();
  const json& ga = sa["groups"];
  const json& gb = sb["groups"];
  const size_t groups = std::max(ga.size(), gb.size());
  // Groups only one run has (`add_param_group`) are said as a count, with the settings in which
  // each differs from that run's group 0 (`added`: a weight decay of its own, an lr): what
  // its extra ops come from.
  if (ga.size() != gb.size()) {
    json count = {{"group", nullptr}, {"name", "param groups"}, {"a", ga.size()}, {"b", gb.size()}};
    const json& more = ga.size() > gb.size() ? ga : gb;
    json added = json::array();
    for (size_t g = std::min(ga.size(), gb.size()); g < more.size() && more[0].is_object(); ++g) {
      if (!more[g].is_object()) continue;
      for (const auto& [n, v] : more[g].items())
        if (n != "params" && more[0].value(n, json()) != v)
          added.push_back(
              {{"group", g}, {"name", n}, {"value", v}, {"group_0", more[0].value(n, json())}});
    }
    if (!added.empty()) count["added"] = std::move(added);
    differs.push_back(std::move(count));
  }
  for (size_t g = 0; g < std::min(ga.size(), gb.size()); ++g) {
    const json empty = json::object();
    const json& x = g < ga.size() && ga[g].is_object() ? ga[g] : empty;
    const json& y = g < gb.size() && gb[g].is_object() ? gb[g] : empty;
    std::set<std::string> names;
    for (const auto& [k, v] : x.items()) names.insert(k);
    for (const auto& [k, v] : y.items()) names.insert(k);
    // The hyperparameters first; a parameter count that differs says the groups hold other
    // parameters (a layer frozen in one run).
    std::vector<std::string> order(names.begin(), names.end());
    std::stable_partition(order.begin(), order.end(),
                          [](const std::string& n) { return n != "params"; });
    for (const std::string& n : order) {
      const json vx = x.value(n, json()), vy = y.value(n, json());
      if (vx == vy) continue;
      json d = {{"group", g}, {"name", n}, {"a", vx}, {"b", vy}};
      // A setting one run's group does not have at all (`initial_lr`, which a scheduler adds).
      if (!x.contains(n) || !y.contains(n)) d["unset"] = x.contains(n) ? "b" : "a";
      differs.push_back(std::move(d));
    }
  }
  std::string text;
  const std::string name_a = optimizer_name(who_a), name_b = optimizer_name(who_b);
  const std::string where = name_a == name_b
                                ? "the step of " + name_a
                                : "the steps of " + name_a + " in A and " + name_b + " in B";
  if (sa["optimizer"] != sb["optimizer"]) {
    text = "inside " + where + ": the optimizers are of other classes";
  } else if (!differs.empty()) {
    text = "inside " + where + ": ";
    const size_t shown = std::min<size_t>(differs.size(), 3);
    for (size_t k = 0; k < shown; ++k) {
      const json& d = differs[k];
      if (k > 0) text += "; ";
      if (d["group"].is_null()) {
        text += "A has " + value_text(d["a"]) + " param group(s) and B " + value_text(d["b"]) +
                " (the groups it was made with, or add_param_group)";
        // "B's param group 1 has weight_decay 0.0001 (group 0: 0)".
        const std::string run = d["a"].get<size_t>() > d["b"].get<size_t>() ? "A" : "B";
        for (const json& x : d.value("added", json::array()))
          text += "; " + run + "'s param group " + std::to_string(x["group"].get<size_t>()) +
                  " has " + x["name"].get<std::string>() + " " + value_text(x["value"]) +
                  " (group 0: " + value_text(x["group_0"]) + ")";
        continue;
      }
      const std::string what =
          d["name"] == "params" ? "parameter count" : d["name"].get<std::string>();
      const std::string unset = d.value("unset", std::string());
      auto side = [&](const char* run) {
        return unset == run ? std::string("unset") : value_text(d[run]);
      };
      text += (groups > 1 ? "param group " + std::to_string(d["group"].get<size_t>()) + "'s "
                          : std::string()) +
              what + " is " + side("a") + " in A and " + side("b") + " in B";
      if (what == "initial_lr" && !unset.empty())
        text += std::string(" (an LR scheduler in ") + (unset == "a" ? "B" : "A") + " only)";
    }
    if (differs.size() > shown)
      text += " (and " + std::to_string(differs.size() - shown) + " more)";
    if (differs[0].value("name", std::string()) == "params")
      text +=
          " (the optimizer was given other parameters: a layer frozen, requires_grad False, "
          "or left out in one run, or a weight tied in one run only, such as an embedding "
          "shared with the output layer: model.parameters() lists it once)";
    else if (!differs[0]["group"].is_null())
      text +=
          " (as the optimizer was made, or as a scheduler or the program set it before this "
          "step)";
  } else {
    text = "inside " + where +
           ", whose param groups' settings (lr, betas, eps, weight decay ...) "
           "are the same in both runs: the scalar comes from the optimizer's state, such as the "
           "step count of a bias correction";
  }
  return {{"a", who_a}, {"b", who_b}, {"differs", differs}, {"text", text}};
}

}  // namespace tdbg::diff
