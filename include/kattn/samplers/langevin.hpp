// kattn/samplers/langevin.hpp — learned frequencies: N particles ω_k (Ω's columns for the
// feature map Map; ω_k ∈ R^{2d} for paired maps) moved by projected Langevin dynamics on
//   H(Ω) = −1/(n(n−1)) Σ_{i≠j} y_iᵀy_j φ_Ω(x_i)ᵀφ_Ω(x_j) + λ/(N(N−1)) Σ_{k≠l} g(ω_k − ω_l),
// label alignment plus a Riesz/Coulomb/log repulsion g. Particles are state (is_random =
// false): `sample` ignores its params and seed and returns them (count = N, dim = D); the
// sampler's `params` (orthogonal_gaussian_params: σ and norms of the initial draw) are read
// only by the constructor, from cfg.sampler. Same seed → same trajectory on any thread count.
//   kattn::attention_config<features::trig, samplers::langevin<features::trig>> cfg{…};
//   samplers::langevin<features::trig> lv(cfg, opts);  // N = num_features particles in R^d
//   lv.set_data(x, labels); lv.run();                  // phase A (or lv.step(dE_dOmega, E))
//   linear_attention<features::trig, samplers::langevin<features::trig>> attn(cfg, lv);  // Ω frozen
// Step and stopping rules, label codings, energy evaluation: docs/samplers.md §2 (langevin).
#pragma once

#include <algorithm>
#include <concepts>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "../fwd.hpp"
#include "../features/feature_map.hpp"
#include "../features/omega_layout.hpp"
#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/random.hpp"
#include "../linalg/row_ops.hpp"
#include "../core/shape.hpp"
#include "../features/feature_params.hpp"
#include "detail/alignment.hpp"
#include "gaussian.hpp"
#include "orthogonal_gaussian.hpp"
#include "sampler_params.hpp"

namespace kattn::samplers {

/// Pair potential g of the repulsion term.
enum class repulsion {
    riesz,    ///< (‖r‖² + ε²)^{−s/2}, s = langevin_options::riesz_s > 0
    coulomb,  ///< Riesz with s = D − 2 (D ≥ 3; for D = 2 the Coulomb kernel is the log one)
    log,      ///< −½ log(‖r‖² + ε²)
};

/// How labels enter y_iᵀy_j in the alignment energy.
enum class label_coding {
    one_hot,  ///< y_iᵀy_j = [c_i = c_j]
    simplex,  ///< 1 for the same class, −1/(C−1) otherwise (binary: ±1 labels); C ≥ 2
};

/// Hyper-parameters of the Langevin particle sampler (see the header comment).
struct langevin_options {
    /// The map's parameters for the constructor that takes no operator configuration
    /// (pre-0.2 fields; each must be a parameter of the map or hold its default).
    feature_params features{};
    double step_size = 1e-3;                                ///< η > 0
    double beta = std::numeric_limits<double>::infinity();  ///< inverse temperature β > 0; ∞: no noise
    double lambda = 0.0;                                    ///< repulsion strength λ ≥ 0
    repulsion potential = repulsion::log;
    double riesz_s = 1.0;                                            ///< s > 0 for repulsion::riesz
    double softening = 1e-3;                                         ///< ε > 0
    double radius = std::numeric_limits<double>::infinity();         ///< R > 0: ‖ω_k‖ ≤ R
    double gradient_clip = std::numeric_limits<double>::infinity();  ///< per-particle ‖N∇_{ω_k}H‖ cap, > 0
    label_coding labels = label_coding::one_hot;
    index_t max_steps = 1000;  ///< run(): iteration cap ≥ 1
    index_t window = 50;       ///< stopping rule window w ≥ 1
    double tolerance = 1e-5;   ///< relative energy change ≥ 0
    double energy_atol = 0.0;  ///< absolute slack of the stopping rule ≥ 0
    index_t kta_interval = 1;  ///< record the centred KTA every k steps (0: never; NaN otherwise)
};

/// One step's record: energies and KTA of the particles the step started from, the largest
/// particle move it made, and the minimum pairwise distance before the move.
struct langevin_record {
    double energy = 0, alignment = 0, repulsion = 0, kta = 0, max_move = 0, min_distance = 0;
};

/// Per-step history of a run (struct of arrays, one entry per step).
struct langevin_history {
    std::vector<double> energy;        ///< H = alignment + repulsion
    std::vector<double> alignment;     ///< V (or the external energy E; NaN if not given)
    std::vector<double> repulsion;     ///< λ·W
    std::vector<double> kta;           ///< centred kernel-target alignment (NaN when not recorded)
    std::vector<double> max_move;      ///< max_k ‖ω_k^{t+1} − ω_k^t‖
    std::vector<double> min_distance;  ///< min_{k≠l} ‖ω_k − ω_l‖
    bool converged = false;            ///< run() stopped on the energy rule (not the cap)

    index_t steps() const { return index_t(energy.size()); }
    void push(const langevin_record& r) {
        energy.push_back(r.energy);
        alignment.push_back(r.alignment);
        repulsion.push_back(r.repulsion);
        kta.push_back(r.kta);
        max_move.push_back(r.max_move);
        min_distance.push_back(r.min_distance);
    }
};

/// The windowed stopping rule on an energy series (see the header comment).
inline bool energy_converged(const std::vector<double>& e, index_t window, double tol, double atol) {
    const index_t n = index_t(e.size());
    if (n < 2 * window) return false;
    double last = 0, prev = 0;
    for (index_t i = n - window; i < n; ++i) last += e[i];
    for (index_t i = n - 2 * window; i < n - window; ++i) prev += e[i];
    last /= double(window);
    prev /= double(window);
    if (!std::isfinite(last) || !std::isfinite(prev)) return false;
    return std::abs(last - prev) <= tol * std::abs(last) + atol;
}

/// Map: the feature map whose kernel the particles align. Backend: the execution backend
/// whose row operations (`execution_backend_traits<Backend>::row_ops`) evaluate the map's
/// activation — backends::reference (scalar, the default) or backends::simd (xsimd, vectorised
/// sin/cos/exp; results agree to rounding and stay thread-count independent). A backend that
/// publishes no row operations gets the scalar ones.
template <class Map, class Backend = backends::reference>
class langevin {
    using traits = feature_map_traits<Map>;
    using ops = detail::row_ops_of<Backend>;

public:
    static constexpr const char* name = "langevin";
    /// σ and norms of the initial draw (used by the constructor that takes the operator's
    /// configuration); sample() ignores them: the particles are the state.
    using params = orthogonal_gaussian_params;
    static constexpr bool is_random = false;  // the particles are state
    /// Maps defined with orthogonal frequencies (porf_softplus) start from orthogonal blocks;
    /// the dynamics then move the particles freely (the Coulomb paper's PORF particles).
    static constexpr bool orthogonal_init = traits::requires_orthogonal;
    using map_type = Map;
    using backend_type = Backend;

    /// N particles drawn as gaussian::sample(init, D, N, seed): ω_k ~ N(0, σ⁻² I), exactly the
    /// Ω a gaussian-sampled operator with the same seed starts from; for a map that requires
    /// orthogonal frequencies, orthogonal_gaussian::sample(init, D, N, seed) instead. `seed`
    /// also keys the noise and the map's bias.
    /// The map's parameters come from opt.features.
    langevin(index_t input_dim, index_t num_particles, const langevin_options& opt = {}, std::uint64_t seed = 0,
             const sampler_params& init = {})
        : langevin(input_dim, num_particles, opt, seed, init, detail::map_params_from<Map>(opt.features)) {}

    /// The particles of an operator linear_attention<Map, langevin, …> configured by `cfg`:
    /// input_dim = head_dim, N = num_features (pairs: num_features / 2), the seed, the map's
    /// parameters (`cfg.feature`) and the initial draw's (`cfg.sampler`: σ, norms) all taken
    /// from it — the operator and its particles share one configuration.
    template <class Cfg>
    requires std::same_as<typename Cfg::map_type, Map> && std::same_as<typename Cfg::sampler_type, langevin>
    explicit langevin(const Cfg& cfg, const langevin_options& opt = {})
        : langevin(cfg.head_dim, traits::pairs_or_columns(cfg.num_features), opt, cfg.seed, initial_draw(cfg),
                   map_parameters_of(cfg, opt)) {}

    /// Particles given as an [N, D] tensor (row k = ω_k).
    langevin(index_t input_dim, const xt::xtensor<double, 2>& particles, const langevin_options& opt = {},
             std::uint64_t seed = 0)
        : d_(input_dim), opt_(opt), seed_(seed), features_(detail::map_params_from<Map>(opt.features)) {
        detail::require(input_dim >= 1, "input_dim", ">= 1", input_dim);
        D_ = traits::frequency_dim(d_);
        N_ = index_t(particles.shape()[0]);
        validate_options();
        init_bias();
        set_particles(particles);
    }

    // ---- spectral_sampler interface ------------------------------------------------------
    /// Writes the current particles: out[k*dim + i] = component i of ω_k. `params` and `seed`
    /// are ignored (they were used at construction). Throws unless dim == D and count == N.
    template <class T>
    void sample(const params&, index_t dim, index_t count, std::uint64_t, T* out) const {
        static_assert(std::is_floating_point_v<T>, "langevin::sample: T must be floating point");
        detail::require(dim == D_, "dim",
                        "the particle dimension " + std::to_string(D_) + " (input_dim " + std::to_string(d_) +
                            (traits::uses_pairs ? ", doubled for pairs)" : ")"),
                        dim);
        detail::require(count == N_, "num_features",
                        "count == the number of particles N = " + std::to_string(N_) +
                            (traits::uses_pairs ? " (pairs: num_features = 2N)" : ""),
                        count);
        detail::require(out != nullptr, "out", "a non-null output pointer", "nullptr");
        for (index_t j = 0; j < N_ * D_; ++j) out[j] = static_cast<T>(w_[j]);
    }

    // ---- data and state ------------------------------------------------------------------
    /// The labelled data of the alignment energy: x [n, d], n ≥ 2, finite; labels[i] in
    /// [0, C), C = num_classes (0: max label + 1). The simplex coding needs C ≥ 2.
    void set_data(const xt::xtensor<double, 2>& x, std::span<const int> labels, index_t num_classes = 0) {
        detail::require(x.dimension() == 2 && index_t(x.shape()[1]) == d_ && x.shape()[0] >= 2, "x",
                        "shape [n >= 2, input_dim = " + std::to_string(d_) + "]", detail::shape_text(x.shape()));
        const index_t n = index_t(x.shape()[0]);
        detail::require(index_t(labels.size()) == n, "labels", "one label per row of x (" + std::to_string(n) + ")",
                        labels.size());
        detail::check_finite("x", x.data(), index_t(x.size()));
        int mx = -1;
        for (index_t i = 0; i < n; ++i) {
            detail::require(labels[i] >= 0, "labels", "values >= 0", labels[i]);
            mx = std::max(mx, labels[i]);
        }
        const index_t C = num_classes > 0 ? num_classes : index_t(mx) + 1;
        detail::require(index_t(mx) < C, "labels", "values < num_classes = " + std::to_string(C), mx);
        if (opt_.labels == label_coding::simplex)
            detail::require(C >= 2, "num_classes", ">= 2 for label_coding::simplex", C);
        x_.assign(x.data(), x.data() + x.size());
        labels_.assign(labels.begin(), labels.end());
        n_ = n;
        C_ = C;
    }

    /// Replaces the particles ([N, D], finite); N may change only through the constructor.
    void set_particles(const xt::xtensor<double, 2>& particles) {
        detail::require(particles.dimension() == 2 && index_t(particles.shape()[0]) == N_ && N_ >= 1 &&
                            index_t(particles.shape()[1]) == D_,
                        "particles",
                        "shape [N >= 1, " + std::to_string(D_) + "]" +
                            (N_ >= 1 ? " with N = " + std::to_string(N_) : std::string()),
                        detail::shape_text(particles.shape()));
        detail::check_finite("particles", particles.data(), index_t(particles.size()));
        w_.assign(particles.data(), particles.data() + particles.size());
    }

    /// Replaces the (fixed) bias of a map with one (size N).
    void set_bias(const std::vector<double>& b) {
        detail::require(traits::uses_bias, "bias", std::string("no bias: map '") + Map::name + "' has none",
                        "a bias of size " + std::to_string(b.size()));
        detail::require(index_t(b.size()) == N_, "bias", "size " + std::to_string(N_), b.size());
        detail::check_finite("bias", b.data(), index_t(b.size()));
        bias_ = b;
    }

    index_t input_dim() const { return d_; }
    index_t num_particles() const { return N_; }
    /// D = d, or 2d for paired maps.
    index_t particle_dim() const { return D_; }
    const langevin_options& options() const { return opt_; }
    /// The map's parameters the energy is evaluated with.
    const map_params_t<Map>& map_parameters() const { return features_; }
    std::uint64_t seed() const { return seed_; }
    /// Steps taken since construction (the noise counter t).
    index_t steps_taken() const { return t_; }
    const std::vector<double>& bias() const { return bias_; }
    const langevin_history& history() const { return hist_; }

    /// The particles as an [N, D] tensor.
    xt::xtensor<double, 2> particles() const {
        xt::xtensor<double, 2> p = xt::xtensor<double, 2>::from_shape({std::size_t(N_), std::size_t(D_)});
        std::copy(w_.begin(), w_.end(), p.data());
        return p;
    }
    /// Ω in the attention operator's layout [d, P] (pairs: ω₁ in columns [0, N), ω₂ in [N, 2N)).
    xt::xtensor<double, 2> omega() const {
        const std::vector<double> om = omega_flat();
        xt::xtensor<double, 2> o = xt::xtensor<double, 2>::from_shape({std::size_t(d_), std::size_t(P())});
        std::copy(om.begin(), om.end(), o.data());
        return o;
    }

    // ---- energies ------------------------------------------------------------------------
    /// V(Ω) of the data; writes ∂V/∂ω ([N, D]) into *grad when given.
    double alignment_energy(xt::xtensor<double, 2>* grad = nullptr) const {
        require_data();
        std::vector<double> U, phi, g;
        const double v = alignment_impl(U, phi, grad ? &g : nullptr);
        if (grad) *grad = to_particle_tensor(g);
        return v;
    }
    /// λ·W(Ω); writes its gradient λ·∂W/∂ω ([N, D]) into *grad when given.
    double repulsion_energy(xt::xtensor<double, 2>* grad = nullptr) const {
        std::vector<double> g;
        double md = 0;
        const double r = repulsion_impl(grad ? &g : nullptr, md);
        if (grad) {
            *grad = xt::xtensor<double, 2>::from_shape({std::size_t(N_), std::size_t(D_)});
            std::copy(g.begin(), g.end(), grad->data());
        }
        return r;
    }
    /// Centred kernel-target alignment of φ_Ω on the data.
    double kta() const {
        require_data();
        std::vector<double> U, phi;
        features_impl(U, phi);
        return detail::centred_kta(phi.data(), n_, Map::feature_dim(N_), labels_.data(), C_);
    }
    /// Minimum pairwise particle distance (+∞ for one particle).
    double min_distance() const {
        double md = 0;
        detail::repulsion_energy(w_.data(), N_, D_, kernel(), riesz_exponent(), opt_.softening, 0.0, nullptr, md);
        return md;
    }
    /// H = V + λW with its terms and the KTA, without moving.
    langevin_record evaluate() const {
        require_data();
        langevin_record r;
        std::vector<double> U, phi;
        r.alignment = alignment_impl(U, phi, nullptr);
        r.repulsion = repulsion_impl(nullptr, r.min_distance);
        r.energy = r.alignment + r.repulsion;
        r.kta = detail::centred_kta(phi.data(), n_, Map::feature_dim(N_), labels_.data(), C_);
        return r;
    }

    // ---- dynamics ------------------------------------------------------------------------
    /// One Langevin step on H = V + λW (needs set_data()); appended to history().
    langevin_record step() {
        require_data();
        langevin_record r;
        std::vector<double> U, phi, g;
        r.alignment = alignment_impl(U, phi, &g);
        r.kta = record_kta() ? detail::centred_kta(phi.data(), n_, Map::feature_dim(N_), labels_.data(), C_)
                             : std::numeric_limits<double>::quiet_NaN();
        return finish_step(r, g);
    }

    /// One Langevin step on E + λW for an external energy E whose gradient ∂E/∂Ω the caller
    /// gives in Ω's layout [d, P] (e.g. d_omega of linear_attention::backward); `energy` is
    /// E's value for the history and the stopping rule (NaN: unknown, the rule cannot fire).
    template <class T>
    langevin_record step(const xt::xtensor<T, 2>& external_grad,
                         double energy = std::numeric_limits<double>::quiet_NaN()) {
        detail::require(index_t(external_grad.shape()[0]) == d_ && index_t(external_grad.shape()[1]) == P(),
                        "external_grad",
                        "shape [" + std::to_string(d_) + ", " + std::to_string(P()) + "] (Omega's layout [d, P])",
                        detail::shape_text(external_grad.shape()));
        detail::check_finite("external_grad", external_grad.data(), index_t(external_grad.size()));
        std::vector<double> go(external_grad.begin(), external_grad.end());
        std::vector<double> g = omega_to_particles(go);
        langevin_record r;
        r.alignment = energy;
        r.kta = std::numeric_limits<double>::quiet_NaN();
        return finish_step(r, g);
    }

    /// Steps until the stopping rule fires or `max_steps` (default: options().max_steps)
    /// steps were taken; returns this run's history (history() keeps every step).
    langevin_history run(index_t max_steps = 0) {
        const index_t cap = max_steps > 0 ? max_steps : opt_.max_steps;
        detail::require(cap >= 1, "max_steps", ">= 1", cap);
        require_data();
        langevin_history h;
        for (index_t s = 0; s < cap; ++s) {
            h.push(step());
            if (energy_converged(h.energy, opt_.window, opt_.tolerance, opt_.energy_atol)) {
                h.converged = true;
                break;
            }
        }
        return h;
    }

    /// The stopping rule applied to history().
    bool converged() const { return energy_converged(hist_.energy, opt_.window, opt_.tolerance, opt_.energy_atol); }

private:
    langevin(index_t input_dim, index_t num_particles, const langevin_options& opt, std::uint64_t seed,
             const sampler_params& init, const map_params_t<Map>& features)
        : d_(input_dim), N_(num_particles), opt_(opt), seed_(seed), features_(features) {
        detail::require(input_dim >= 1, "input_dim", ">= 1", input_dim);
        detail::require(num_particles >= 1, "num_particles", ">= 1", num_particles);
        D_ = traits::frequency_dim(d_);
        validate_options();
        w_.resize(static_cast<std::size_t>(N_ * D_));
        if constexpr (orthogonal_init)
            orthogonal_gaussian::sample(init, D_, N_, seed, w_.data());
        else
            gaussian::sample(init, D_, N_, seed, w_.data());
        init_bias();
    }

    template <class Cfg>
    static sampler_params initial_draw(Cfg cfg) {
        cfg.resolve();
        return sampler_params{cfg.sampler.sigma, cfg.sampler.norms};
    }
    /// The map's parameters of `cfg`; opt.features must be left at its default (one source).
    template <class Cfg>
    static map_params_t<Map> map_parameters_of(Cfg cfg, const langevin_options& opt) {
        const feature_params def{};
        const feature_params& f = opt.features;
        detail::require(f.temperature == def.temperature && f.floor == def.floor && f.scale == def.scale &&
                            f.renormalize == def.renormalize,
                        "features", "its default: the map's parameters come from the operator's configuration",
                        "changed langevin_options::features");
        cfg.resolve();
        return cfg.feature;
    }

    index_t P() const { return Map::projection_dim(N_); }

    void validate_options() const {
        const auto& o = opt_;
        Map::validate(features_, d_, N_ > 0 ? N_ : 1);
        detail::require(std::isfinite(o.step_size) && o.step_size > 0, "step_size", "a finite value > 0", o.step_size);
        detail::require(o.beta > 0 && !std::isnan(o.beta), "beta", "a value > 0 (infinity: no noise)", o.beta);
        detail::require(std::isfinite(o.lambda) && o.lambda >= 0, "lambda", "a finite value >= 0", o.lambda);
        detail::require(
            o.potential == repulsion::riesz || o.potential == repulsion::coulomb || o.potential == repulsion::log,
            "potential", "repulsion::riesz, coulomb or log", static_cast<int>(o.potential));
        if (o.potential == repulsion::riesz)
            detail::require(std::isfinite(o.riesz_s) && o.riesz_s > 0, "riesz_s", "a finite value > 0", o.riesz_s);
        if (o.potential == repulsion::coulomb)
            detail::require(D_ >= 2, "potential", "a particle dimension >= 2 for repulsion::coulomb (s = D - 2)",
                            "D = " + std::to_string(D_));
        detail::require(std::isfinite(o.softening) && o.softening > 0, "softening", "a finite value > 0", o.softening);
        detail::require(o.radius > 0 && !std::isnan(o.radius), "radius", "a value > 0 (infinity: no projection)",
                        o.radius);
        detail::require(o.gradient_clip > 0 && !std::isnan(o.gradient_clip), "gradient_clip",
                        "a value > 0 (infinity: no clipping)", o.gradient_clip);
        detail::require(o.labels == label_coding::one_hot || o.labels == label_coding::simplex, "labels",
                        "label_coding::one_hot or simplex", static_cast<int>(o.labels));
        detail::require(o.max_steps >= 1, "max_steps", ">= 1", o.max_steps);
        detail::require(o.window >= 1, "window", ">= 1", o.window);
        detail::require(std::isfinite(o.tolerance) && o.tolerance >= 0, "tolerance", "a finite value >= 0",
                        o.tolerance);
        detail::require(std::isfinite(o.energy_atol) && o.energy_atol >= 0, "energy_atol", "a finite value >= 0",
                        o.energy_atol);
        detail::require(o.kta_interval >= 0, "kta_interval", ">= 0", o.kta_interval);
    }

    void init_bias() {
        if constexpr (traits::uses_bias) {
            bias_.resize(static_cast<std::size_t>(N_));
            Map::init_bias(N_, seed_, bias_.data());
        }
    }

    void require_data() const {
        detail::require(n_ >= 2, "x", "a data set (set_data) before computing the alignment energy", "none");
    }

    bool record_kta() const { return opt_.kta_interval > 0 && t_ % opt_.kta_interval == 0; }

    detail::repulsion_kernel kernel() const {
        if (opt_.potential == repulsion::log) return detail::repulsion_kernel::log;
        if (opt_.potential == repulsion::coulomb && D_ == 2) return detail::repulsion_kernel::log;
        return detail::repulsion_kernel::riesz;
    }
    double riesz_exponent() const { return opt_.potential == repulsion::coulomb ? double(D_ - 2) : opt_.riesz_s; }

    const double* bias_ptr() const { return traits::uses_bias ? bias_.data() : nullptr; }

    std::vector<double> omega_flat() const {
        std::vector<double> om(static_cast<std::size_t>(d_ * P()));
        detail::frequencies_to_omega<traits::uses_pairs>(d_, N_, w_.data(), om.data());
        return om;
    }
    std::vector<double> omega_to_particles(const std::vector<double>& go) const {
        std::vector<double> g(static_cast<std::size_t>(N_ * D_));
        detail::omega_to_frequencies<traits::uses_pairs>(d_, N_, go.data(), g.data());
        return g;
    }
    xt::xtensor<double, 2> to_particle_tensor(const std::vector<double>& g) const {
        xt::xtensor<double, 2> t = xt::xtensor<double, 2>::from_shape({std::size_t(N_), std::size_t(D_)});
        std::copy(g.begin(), g.end(), t.data());
        return t;
    }

    void features_impl(std::vector<double>& U, std::vector<double>& phi) const {
        const std::vector<double> om = omega_flat();
        U.resize(static_cast<std::size_t>(n_ * P()));
        phi.resize(static_cast<std::size_t>(n_ * Map::feature_dim(N_)));
        detail::alignment_features<Map, ops>(features_, d_, N_, om.data(), bias_ptr(), x_.data(), n_, U.data(),
                                             phi.data());
    }

    /// V; fills U, Φ; writes ∂V/∂ω (particle layout) into *g when given.
    double alignment_impl(std::vector<double>& U, std::vector<double>& phi, std::vector<double>* g) const {
        features_impl(U, phi);
        double a = 1.0, b = 0.0;
        if (opt_.labels == label_coding::simplex) {
            a = double(C_) / double(C_ - 1);
            b = -1.0 / double(C_ - 1);
        }
        std::vector<double> go;
        if (g) go.assign(static_cast<std::size_t>(d_ * P()), 0.0);
        const double v =
            detail::alignment_energy<Map, ops>(features_, d_, N_, bias_ptr(), x_.data(), labels_.data(), n_, C_, a, b,
                                               U.data(), phi.data(), g ? go.data() : nullptr);
        if (g) *g = omega_to_particles(go);
        return v;
    }

    /// λW; writes λ∂W/∂ω into *g when given.
    double repulsion_impl(std::vector<double>* g, double& min_dist) const {
        if (g) g->assign(static_cast<std::size_t>(N_ * D_), 0.0);
        const double W = detail::repulsion_energy(w_.data(), N_, D_, kernel(), riesz_exponent(), opt_.softening,
                                                  opt_.lambda, g ? g->data() : nullptr, min_dist);
        return opt_.lambda * W;
    }

    /// Adds λ∇W to the energy gradient g (particle layout), moves every particle, records.
    langevin_record finish_step(langevin_record r, std::vector<double>& g) {
        std::vector<double> gr;
        r.repulsion = repulsion_impl(opt_.lambda > 0 ? &gr : nullptr, r.min_distance);
        r.energy = r.alignment + r.repulsion;
        for (std::size_t j = 0; j < gr.size(); ++j) g[j] += gr[j];
        for (const double v : g)
            detail::require(std::isfinite(v), "particles", "a finite energy gradient (lower step_size or add a radius)",
                            v);
        const double eta = opt_.step_size;
        const double noise = std::isinf(opt_.beta) ? 0.0 : std::sqrt(2.0 * eta / opt_.beta);
        const random_stream rs(seed_, streams::noise);
        const std::uint64_t base = static_cast<std::uint64_t>(t_) * static_cast<std::uint64_t>(N_ * D_);
        double max_move = 0.0;
        std::vector<double> nw(static_cast<std::size_t>(D_));
        for (index_t k = 0; k < N_; ++k) {
            double* gk = g.data() + k * D_;
            double gn = 0.0;
            for (index_t i = 0; i < D_; ++i) {
                gk[i] *= double(N_);
                gn += gk[i] * gk[i];
            }
            gn = std::sqrt(gn);
            const double c = gn > opt_.gradient_clip ? opt_.gradient_clip / gn : 1.0;
            double wn = 0.0;
            for (index_t i = 0; i < D_; ++i) {
                double v = w_[k * D_ + i] - eta * c * gk[i];
                if (noise > 0.0) v += noise * rs.normal(base + static_cast<std::uint64_t>(k * D_ + i));
                nw[i] = v;
                wn += v * v;
            }
            wn = std::sqrt(wn);
            const double pr = wn > opt_.radius ? opt_.radius / wn : 1.0;
            double mv = 0.0;
            for (index_t i = 0; i < D_; ++i) {
                const double v = nw[i] * pr;
                mv += (v - w_[k * D_ + i]) * (v - w_[k * D_ + i]);
                w_[k * D_ + i] = v;
            }
            max_move = std::max(max_move, std::sqrt(mv));
        }
        r.max_move = max_move;
        ++t_;
        hist_.push(r);
        return r;
    }

    index_t d_ = 0, N_ = 0, D_ = 0;
    langevin_options opt_;
    std::uint64_t seed_ = 0;
    map_params_t<Map> features_{};
    std::vector<double> w_, bias_;
    std::vector<double> x_;
    std::vector<int> labels_;
    index_t n_ = 0, C_ = 0, t_ = 0;
    langevin_history hist_;
};

}  // namespace kattn::samplers
