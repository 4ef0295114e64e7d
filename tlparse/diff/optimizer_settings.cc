// The hyperparameters a Python optimizer stepped with, read back and compared
// (optimizer_settings.h). The recorder writes them as the name of a region of kind 3 whose
// parent is the step's region (docs/schema.md).
#include "tlparse/diff/optimizer_settings.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

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

// One optimizer's settings at each of a thread's steps, in step order, and where among them
// the step holding an op lies.
struct Series {
  std::vector<json> steps;
  int at = -1;  // the position of the step holding the op, -1 where none does
};

// The settings of optimizer `index` at each step of `at.thread`.
Series settings_series(const Reader& reader, StepAt at, int index) {
  Series series;
  (void)reader.query(
      "SELECT r.start_seq, s.text FROM regions o JOIN regions r ON o.parent = r.id JOIN strings "
      "s ON s.id = o.name WHERE o.kind = 3 AND r.kind = 1 AND r.thread = " +
          std::to_string(at.thread) + " ORDER BY r.start_seq",
      [&](const std::vector<std::string>& row) {
        json parsed = json::parse(row[1], nullptr, /*allow_exceptions=*/false);
        if (!parsed.is_object() || parsed.value("index", 0) != index) return true;
        if (std::atoll(row[0].c_str()) <= at.seq) series.at = static_cast<int>(series.steps.size());
        series.steps.push_back(std::move(parsed));
        return true;
      });
  return series;
}

// Setting `name` of param group `group` at position `i` of a series, where it is a number.
std::optional<double> setting(const Series& s, int64_t i, size_t group, const std::string& name) {
  if (i < 0 || i >= static_cast<int64_t>(s.steps.size())) return std::nullopt;
  const json& groups = s.steps[static_cast<size_t>(i)].value("groups", json());
  if (!groups.is_array() || group >= groups.size() || !groups[group].is_object())
    return std::nullopt;
  const json v = groups[group].value(name, json());
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

bool same_number(double x, double y) { return std::fabs(x - y) <= 1e-12 * std::fabs(x) + 1e-300; }

// How a setting that differs at the divergence (a learning rate a scheduler sets) follows the
// other run's over the next steps: {"run": the run whose schedule is ahead, "ahead": 1}
// where at each step it has the value the other run has one step later (scheduler.step()
// called before optimizer.step()), {"run", "rate": 2} where it has the value the other has
// at twice its step (scheduler.step() called twice per step); null where neither holds for
// all of the (at least two) steps compared.
json schedule_shift(const Series& a, const Series& b, size_t group, const std::string& name) {
  if (a.at < 0 || b.at < 0) return nullptr;
  constexpr int kSteps = 5;
  // Whether `x`'s value at each position in [from, to) is `y`'s at `map(position)`, at two
  // positions at least, one of them from the divergence on: the values where the runs part
  // are the ones to explain (a constant lr before it matches any map; t143 F3).
  auto follows = [&](const Series& x, const Series& y, int64_t from, int64_t to, auto map) {
    int matched = 0;
    bool at_divergence = false;
    for (int64_t i = from; i < to; ++i) {
      const auto vx = setting(x, i, group, name), vy = setting(y, map(i), group, name);
      if (!vx || !vy) continue;
      if (!same_number(*vx, *vy)) return false;
      ++matched;
      at_divergence = at_divergence || i >= x.at;
    }
    return matched >= 2 && at_divergence;
  };
  // From the steps before the divergence on: a schedule that runs ahead (or twice as fast)
  // differs from its first steps, so a shift that holds only from the divergence on is
  // another schedule (a warmup of another shape that parts at step 2).
  for (const auto& [x, y, run] : {std::tuple{&b, &a, "B"}, std::tuple{&a, &b, "A"}}) {
    const int64_t shift = y->at - x->at + 1;
    const int64_t from = std::max<int64_t>(std::max<int64_t>(0, -shift), x->at - kSteps);
    if (follows(*x, *y, from, x->at + kSteps, [&](int64_t i) { return i + shift; }))
      return {{"run", run}, {"setting", name}, {"ahead", 1}};
  }
  if (a.at == b.at && a.at > 0)
    for (const auto& [x, y, run] : {std::tuple{&b, &a, "B"}, std::tuple{&a, &b, "A"}})
      if (follows(*x, *y, 1, x->at + kSteps, [](int64_t i) { return 2 * i; }))
        return {{"run", run}, {"setting", name}, {"rate", 2}};
  return nullptr;
}

// What an optimizer's scalar argument is made of, where both runs' values are the same
// expression of a param group's settings (AdamW's decay multiplies by 1 - lr * weight_decay,
// SGD adds the gradient times -lr, Adam's averages mix by betas): the expression and the
// group that gives it in each run, or nullopt where none of these forms fits both.
struct Expression {
  std::string text;                 // "1 - lr * weight_decay ..."
  size_t group_a = 0, group_b = 0;  // the param group whose settings give it, in each run
};
std::optional<Expression> scalar_expression(const json& sa, const json& sb, double a, double b) {
  using Get = std::function<std::optional<double>(const json&)>;
  auto number = [](const json& g, const char* n, int k = -1) -> std::optional<double> {
    const json v = g.value(n, json());
    if (k >= 0 && v.is_array() && v.size() > static_cast<size_t>(k) && v[k].is_number())
      return v[k].get<double>();
    if (k < 0 && v.is_number()) return v.get<double>();
    return std::nullopt;
  };
  auto lr = [&](const json& g) { return number(g, "lr"); };
  auto wd = [&](const json& g) { return number(g, "weight_decay"); };
  auto product = [](std::optional<double> x, std::optional<double> y) -> std::optional<double> {
    if (x && y) return *x * *y;
    return std::nullopt;
  };
  auto one_minus = [](std::optional<double> x) -> std::optional<double> {
    if (x) return 1 - *x;
    return std::nullopt;
  };
  auto negative = [](std::optional<double> x) -> std::optional<double> {
    if (x) return -*x;
    return std::nullopt;
  };
  const std::vector<std::pair<const char*, Get>> forms = {
      {"lr", lr},
      {"-lr", [&](const json& g) { return negative(lr(g)); }},
      {"1 - lr * weight_decay (a decoupled weight decay, as AdamW's)",
       [&](const json& g) { return one_minus(product(lr(g), wd(g))); }},
      {"-lr * weight_decay", [&](const json& g) { return negative(product(lr(g), wd(g))); }},
      {"weight_decay", wd},
      {"momentum", [&](const json& g) { return number(g, "momentum"); }},
      {"1 - dampening", [&](const json& g) { return one_minus(number(g, "dampening")); }},
      {"beta1", [&](const json& g) { return number(g, "betas", 0); }},
      {"1 - beta1", [&](const json& g) { return one_minus(number(g, "betas", 0)); }},
      {"beta2", [&](const json& g) { return number(g, "betas", 1); }},
      {"1 - beta2", [&](const json& g) { return one_minus(number(g, "betas", 1)); }},
      {"eps", [&](const json& g) { return number(g, "eps"); }},
  };
  const json& ga = sa["groups"];
  const json& gb = sb["groups"];
  // The groups whose settings give `v` by `get`.
  auto groups_giving = [](const json& groups, const Get& get, double v) {
    std::vector<size_t> found;
    for (size_t g = 0; g < groups.size(); ++g)
      if (const auto x = groups[g].is_object() ? get(groups[g]) : std::nullopt;
          x && same_number(*x, v))
        found.push_back(g);
    return found;
  };
  // The parameter may lie in another group in each run (a group of its own in one run only,
  // groups built in another order); the same group in both where one fits.
  for (const auto& [text, get] : forms) {
    const std::vector<size_t> in_a = groups_giving(ga, get, a), in_b = groups_giving(gb, get, b);
    if (in_a.empty() || in_b.empty()) continue;
    for (size_t g : in_a)
      if (std::find(in_b.begin(), in_b.end(), g) != in_b.end()) return Expression{text, g, g};
    return Expression{text, in_a[0], in_b[0]};
  }
  return std::nullopt;
}

// As Python writes it (True, None), the optimizer's settings being Python values.
std::string value_text(const json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

json compare_optimizer_settings(const Reader& ra, StepAt a, const Reader& rb, StepAt b,
                                std::optional<std::pair<double, double>> scalar) {
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
  json shift;  // how a scheduler's setting that differs moves in each run (`schedule_shift`)
  const std::string name_a = optimizer_name(who_a), name_b = optimizer_name(who_b);
  const std::string where = name_a == name_b
                                ? "the step of " + name_a
                                : "the steps of " + name_a + " in A and " + name_b + " in B";
  if (sa["optimizer"] != sb["optimizer"]) {
    text = "inside " + where + ": the optimizers are of other classes";
  } else if (!differs.empty()) {
    text = "inside " + where + ": ";
    // A setting that differs alike in every param group (a scheduler sets each group's lr) is
    // said once.
    auto in_every_group = [&](const json& d) {
      if (std::min(ga.size(), gb.size()) < 2 || d["group"].is_null()) return false;
      size_t alike = 0;
      for (const json& e : differs)
        alike +=
            !e["group"].is_null() && e["name"] == d["name"] && e["a"] == d["a"] && e["b"] == d["b"];
      return alike == std::min(ga.size(), gb.size());
    };
    std::vector<const json*> said;
    for (const json& d : differs) {
      const bool repeated = in_every_group(d) && std::any_of(said.begin(), said.end(), [&](auto e) {
                              return (*e)["name"] == d["name"];
                            });
      if (!repeated) said.push_back(&d);
    }
    const size_t shown = std::min<size_t>(said.size(), 3);
    for (size_t k = 0; k < shown; ++k) {
      const json& d = *said[k];
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
      const bool every = in_every_group(d);
      text +=
          (groups > 1 && !every ? "param group " + std::to_string(d["group"].get<size_t>()) + "'s "
                                : std::string()) +
          what + " is " + side("a") + " in A and " + side("b") + " in B" +
          (every ? " in every param group" : "");
      if (what == "initial_lr" && !unset.empty())
        text += std::string(" (an LR scheduler in ") + (unset == "a" ? "B" : "A") + " only)";
    }
    if (said.size() > shown) text += " (and " + std::to_string(said.size() - shown) + " more)";
    // Only where that setting is all that differs: with another initial_lr, the base rate
    // differs, and a linear warmup of twice the rate reads as a schedule moving twice as fast.
    const bool one_setting = std::all_of(differs.begin(), differs.end(), [&](const json& d) {
      return !d["group"].is_null() && d["name"] == differs[0]["name"];
    });
    if (one_setting && differs[0]["name"] != "params")
      shift = schedule_shift(settings_series(ra, a, who_a["index"]),
                             settings_series(rb, b, who_b["index"]),
                             differs[0]["group"].get<size_t>(), differs[0]["name"]);
    if (shift.is_object()) {
      const std::string run = shift["run"], other = run == "A" ? "B" : "A", name = shift["setting"];
      if (shift.contains("ahead"))
        text += ": " + run + "'s " + name + " schedule runs one step ahead of " + other +
                "'s (at each step " + run + " has the " + name + " " + other +
                " has one step later), as scheduler.step() called before optimizer.step() in " +
                run + " gives, or a schedule of " + name + " that starts a step earlier there";
      else
        text += ": " + run + "'s " + name + " schedule moves two steps for each optimizer step, " +
                other + "'s one (at its step k " + run + " has the " + name + " " + other +
                " has at step 2k), as scheduler.step() called twice per step in " + run + " gives";
    } else if (differs[0].value("name", std::string()) == "params") {
      text +=
          " (the optimizer was given other parameters: a layer frozen, requires_grad False, "
          "or left out in one run, a weight tied in one run only, such as an embedding "
          "shared with the output layer: model.parameters() lists it once, or a weight "
          "reparametrized in one run only: weight_norm splits it into weight_g and weight_v)";
    } else if (!differs[0]["group"].is_null()) {
      text +=
          " (as the optimizer was made, or as a scheduler or the program set it before this "
          "step)";
    }
  } else {
    text = "inside " + where +
           ", whose param groups' settings (lr, betas, eps, weight decay ...) "
           "are the same in both runs: the scalar comes from the optimizer's state, such as the "
           "step count of a bias correction";
  }
  json out = {{"a", who_a}, {"b", who_b}, {"differs", differs}, {"text", text}};
  if (shift.is_object()) out["schedule"] = std::move(shift);
  // The argument that differs, named by what it is made of: "1 - lr * weight_decay".
  if (scalar && sa["optimizer"] == sb["optimizer"])
    if (const auto made = scalar_expression(sa, sb, scalar->first, scalar->second)) {
      out["scalar"] = made->text;
      out["text"] = "the argument is " + made->text + "; " + out["text"].get<std::string>();
      // The same settings in both runs, and the parameter in another group in each: the
      // groups were made of the parameters in another order.
      if (differs.empty() && made->group_a != made->group_b) {
        out["group_a"] = made->group_a;
        out["group_b"] = made->group_b;
        out["text"] = "the argument is " + made->text + " of param group " +
                      std::to_string(made->group_a) + " in A and of param group " +
                      std::to_string(made->group_b) + " in B: inside " + where +
                      ", whose param groups' settings are the same in both runs, this parameter "
                      "is in another group in each run, so the groups were given the "
                      "parameters in another order (collected through a set or a dict, whose "
                      "order can change with PYTHONHASHSEED, or sorted differently)";
      }
    }
  return out;
}

}  // namespace tdbg::diff
