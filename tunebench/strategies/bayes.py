"""``bayes``: Bayesian optimisation; a Gaussian process ranks every unmeasured candidate.

The model is a Gaussian process over the log of the objective (times are skewed, and speed-ups
multiply): a Matern 5/2 kernel with one lengthscale per param, plus a linear kernel (a trend
toward an edge of the space, where the best configs of kernels often lie), plus noise. A
config's coordinates are, per param, the log of its value where every value is a positive
number (block sizes and tiles act multiplicatively), else the value's position in the list,
each scaled to [0, 1]. The hyperparameters maximise the marginal likelihood under weak
log-normal priors (gradient steps from the last fit), refitted whenever the data has grown by
``refit`` until it holds ``FIT_POINTS`` points; in between and after, the factor of the kernel
matrix is extended by one point per trial, so a trial costs O(candidates x points).

Each trial measures the unmeasured candidate of the largest expected improvement over the
fastest config measured, evaluated over every candidate rather than a sample. A candidate that
failed enters the model at the slowest time measured: its region is not worth a visit, and it
is never asked again.

The first trials are the best ``warm_trials`` warm configs, then random candidates until
``initial`` are measured. Warm data also seeds the model: up to ``warm_points`` warm configs (the
best half and a random half of the rest) as observations of their standardised log score, with
extra noise ``warm_noise``, so that this task's own measurements soon outweigh them.

Options (keyword arguments):

- ``initial=2``: trials (warm or random) before the model chooses.
- ``warm_trials=3``: warm configs measured first, best first.
- ``warm_points=40``: warm configs the model starts from.
- ``warm_noise=0.3``: extra noise variance of a warm observation (the data's variance is 1).
- ``refit=0.15``: the growth of the data that triggers a new fit of the hyperparameters.
"""

from __future__ import annotations

import math

import numpy as np

from tunebench.strategies.base import Strategy, positions

SQRT5 = math.sqrt(5.0)
#: Log-normal priors of the hyperparameters, (mean, sd) of the log: lengthscale, signal
#: variance, noise variance and linear-trend variance, in the units of standardised data.
PRIORS = {"lengthscale": (math.log(0.3), 1.0), "signal": (0.0, 1.0), "noise": (math.log(1e-2), 2.0),
          "trend": (math.log(0.5), 1.0)}
#: Gradient (Adam) steps of the first fit of the hyperparameters and of a refit, which starts
#: from the last fit; and their step size.
FIT_STEPS, REFIT_STEPS, FIT_RATE = 30, 10, 0.1
#: Points beyond which the hyperparameters stay as last fitted: a gradient step costs O(points^3),
#: and refits near a thousand points took 13 of the 15 s of CPU that ``hybrid`` spent measuring
#: every config of a 1,023-config space; a budget of 200 trials with 40 warm points stays below.
FIT_POINTS = 256
#: Candidates whose kernel against the points is formed at once (see ``GaussianProcess._spread``).
ROWS = 1 << 16


def coordinates(space, keys) -> np.ndarray:
    """Each key as a point of [0, 1]^d (see the module docstring); single-valued params dropped."""
    P = positions(space, keys)
    columns = []
    for j, name in enumerate(space.names):
        values = space.values[name]
        if len(values) < 2:
            continue
        axis = np.log(np.array(values, dtype=float)) if positive(values) else np.arange(len(values), dtype=float)
        columns.append(((axis - axis.min()) / (axis.max() - axis.min()))[P[:, j]])
    return np.stack(columns, axis=1) if columns else np.zeros((len(keys), 0))


def positive(values) -> bool:
    """Whether every value is a positive number (not a bool): amounts whose log is an axis."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values)


def _matern(r2: np.ndarray) -> np.ndarray:
    """The Matern 5/2 correlation at squared scaled distances."""
    r = np.sqrt(np.maximum(r2, 0.0))
    return (1 + SQRT5 * r + 5.0 / 3.0 * r2) * np.exp(-SQRT5 * r)


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz and Stegun 7.1.26, error below 1.5e-7. scipy's exact ``ndtr`` would do, but
    it re-ranks near-ties: 12 of 64 replayed searches (hybrid and bayes, 8 spaces, seeds 0..3,
    150 trials) then ask other configs, and every figure of docs/strategies.md was searched with
    this one. Swap it only with those benchmarks rerun."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def log_expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """log E[max(best - f, 0)] for f ~ N(mu, sd^2): stable far into the tail, where the
    improvement itself underflows and candidates would tie at zero."""
    z = (best - mu) / sd
    out = np.empty_like(z)
    tail = z < -6
    zn = z[~tail]
    cdf = 0.5 * (1 + _erf(zn / math.sqrt(2)))
    pdf = np.exp(-0.5 * zn * zn) / math.sqrt(2 * math.pi)
    out[~tail] = np.log(sd[~tail]) + np.log(np.maximum(zn * cdf + pdf, 1e-300))
    zt = z[tail]  # zn * cdf + pdf ~ pdf / z^2 there
    out[tail] = np.log(sd[tail]) - 0.5 * zt * zt - 0.5 * math.log(2 * math.pi) - 2 * np.log(-zt)
    return out


#: The ranges of the options of warm data and refits, which ``hybrid`` shares.
WARM_RANGES = {"warm_trials": (0, None), "warm_points": (0, None), "warm_noise": (0, None), "refit": (0, None)}


def refit_due(fitted_at: int, points: int, growth: float) -> bool:
    """Whether the hyperparameters are fitted (again) to ``points`` points, the last fit having
    had ``fitted_at``: first, then whenever the data has grown by ``growth``, up to ``FIT_POINTS``."""
    return fitted_at == 0 or fitted_at * (1 + growth) <= points <= FIT_POINTS


def warm_points(warm, index: dict[tuple, int], count: int, rng) -> dict[int, float]:
    """Up to ``count`` warm configs to seed a model with, the best half and a random half of the
    rest, as {candidate index: standardised log score} (several scores of a config: their mean)."""
    scores: dict[int, list[float]] = {}
    for key, score in warm:
        i = index.get(tuple(key))
        if i is not None and score > 0:
            scores.setdefault(i, []).append(math.log(score))
    if len(scores) < 2:
        return {}
    logs = {i: sum(s) / len(s) for i, s in scores.items()}
    ranked = sorted(logs, key=logs.get)
    half = count // 2
    chosen = ranked[:half] + rng.sample(ranked[half:], min(count - half, len(ranked[half:])))
    values = np.array(list(logs.values()))
    mean, sd = values.mean(), max(values.std(), 1e-9)
    return {i: (logs[i] - mean) / sd for i in chosen}


class GaussianProcess:
    """A Gaussian process over a fixed set of candidate coordinates ``X``.

    Its points are candidates (by index), each with its own extra noise. It keeps the inverse
    Cholesky factor of the points, and ``V``, the kernel between every candidate and the points
    times that inverse, so that the posterior of every candidate costs one matrix-vector product
    and adding a point costs O(candidates x points). ``V`` is formed at the first prediction
    after a fit: a model fitted only to weigh its evidence (``hybrid`` fits one per view and
    predicts with one) costs O(points^3), whatever the number of candidates.
    """

    def __init__(self, X: np.ndarray):
        self.X = X
        self.Xc = X - 0.5  # the linear trend pivots on the middle of the space
        d = X.shape[1]
        hyper = [PRIORS[k][0] for k in ("signal", "noise", "trend")]
        self.prior_mean = np.array([PRIORS["lengthscale"][0]] * d + hyper)
        self.prior_sd = np.array([PRIORS["lengthscale"][1]] * d + [PRIORS[k][1] for k in ("signal", "noise", "trend")])
        self.theta = self.prior_mean.copy()
        self.points: list[int] = []
        self.extra: list[float] = []
        self.factored = 0  # points in the factor
        self.V: np.ndarray | None = None  # formed by predict (see the class docstring)

    def _hyper(self, theta: np.ndarray) -> tuple[np.ndarray, float, float, float]:
        """(lengthscales, signal variance, noise variance, trend variance)."""
        d = self.X.shape[1]
        return np.exp(theta[:d]), math.exp(theta[d]), math.exp(theta[d + 1]), math.exp(theta[d + 2])

    def add(self, i: int, extra: float = 0.0) -> None:
        self.points.append(i)
        self.extra.append(extra)

    def fit(self, y: np.ndarray) -> None:
        """Hyperparameters by gradient ascent of the log marginal likelihood plus log priors
        (Adam, from the last fit), then the factor afresh."""
        d, n = self.X.shape[1], len(self.points)
        X, Xc = self.X[self.points], self.Xc[self.points]
        D = ((X[:, None, :] - X[None, :, :]) ** 2).reshape(n * n, d)  # squared distance per param
        G = Xc @ Xc.T
        extra = np.diag(self.extra)
        theta, m, v = self.theta.copy(), np.zeros_like(self.theta), np.zeros_like(self.theta)
        for t in range(1, (REFIT_STEPS if self.factored else FIT_STEPS) + 1):
            ls, s2, sn2, sl2 = self._hyper(theta)
            r2 = (D @ ls**-2).reshape(n, n)
            r = np.sqrt(r2)
            e = np.exp(-SQRT5 * r)
            base = (1 + SQRT5 * r + 5.0 / 3.0 * r2) * e
            Kinv = np.linalg.inv(s2 * base + sl2 * G + sn2 * np.eye(n) + extra)
            alpha = Kinv @ y
            W = np.outer(alpha, alpha) - Kinv  # d log p(y) / dK, times 2
            grad = np.empty_like(theta)
            grad[:d] = 0.5 * ((W * (s2 * 5.0 / 3.0 * (1 + SQRT5 * r) * e)).ravel() @ D) / ls**2
            grad[d] = 0.5 * np.sum(W * (s2 * base))
            grad[d + 1] = 0.5 * sn2 * np.trace(W)
            grad[d + 2] = 0.5 * np.sum(W * (sl2 * G))
            grad -= (theta - self.prior_mean) / self.prior_sd**2
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad**2
            theta += FIT_RATE * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
            theta[:d] = np.clip(theta[:d], math.log(1e-2), math.log(1e2))
            theta[d + 1] = np.clip(theta[d + 1], math.log(1e-6), 0.0)
        self.theta = theta
        self._factor()

    def _factor(self) -> None:
        """The factor of the points afresh; ``V`` waits for :meth:`predict`."""
        sn2 = self._hyper(self.theta)[2]
        L = np.linalg.cholesky(self._cross(self.points, self.points) + np.diag(sn2 + np.array(self.extra)))
        self.Linv = np.linalg.inv(L)
        self.factored = len(self.points)
        self.V = None

    def _cross(self, rows, points: list[int]) -> np.ndarray:
        """The kernel between the candidates ``rows`` (an index list, or a slice) and ``points``,
        its distances expanded into one matrix product: every candidate against many points."""
        ls, s2, _, sl2 = self._hyper(self.theta)
        Z, P = self.X[rows] / ls, self.X[points] / ls
        r2 = (Z**2).sum(1)[:, None] + (P**2).sum(1)[None, :] - 2 * Z @ P.T
        return s2 * _matern(r2) + sl2 * self.Xc[rows] @ self.Xc[points].T

    def _column(self, j: int, rows=slice(None)) -> np.ndarray:
        """The kernel between candidate ``j`` and the candidates ``rows`` (every one by default),
        from the differences themselves: one point's column, exact at small distances."""
        ls, s2, _, sl2 = self._hyper(self.theta)
        return s2 * _matern((((self.X[rows] - self.X[j]) / ls) ** 2).sum(1)) + sl2 * self.Xc[rows] @ self.Xc[j]

    def _spread(self) -> None:
        """``V`` and the prior-minus-explained variance of every candidate, from the factor, for
        ``ROWS`` candidates at a time: the kernel's temporaries over every candidate at once took
        3.5 times ``V`` beside it (11 GB at a million candidates and 200 points)."""
        _, s2, _, sl2 = self._hyper(self.theta)
        n = self.factored
        self.V = np.empty((len(self.X), max(2 * n, 64)))
        self.var = s2 + sl2 * (self.Xc**2).sum(1)
        for start in range(0, len(self.X), ROWS):
            rows = slice(start, start + ROWS)
            self.V[rows, :n] = self._cross(rows, self.points[:n]) @ self.Linv.T
            self.var[rows] -= (self.V[rows, :n] ** 2).sum(1)

    def _extend(self) -> None:
        """Factor in the next point, hyperparameters unchanged (a rank-one Cholesky update), and
        into ``V`` where it is formed."""
        _, s2, sn2, sl2 = self._hyper(self.theta)
        n, j = self.factored, self.points[self.factored]
        row = self.Linv @ self._column(j, self.points[:n])
        lam = math.sqrt(max(s2 + sl2 * self.Xc[j] @ self.Xc[j] - row @ row, 0.0) + sn2 + self.extra[n])
        if self.V is not None:
            column = (self._column(j) - self.V[:, :n] @ row) / lam
            if n == self.V.shape[1]:
                self.V = np.concatenate([self.V, np.empty_like(self.V)], axis=1)
            self.V[:, n] = column
            self.var = self.var - column**2
        Linv = np.zeros((n + 1, n + 1))
        Linv[:n, :n] = self.Linv
        Linv[n, :n] = -(row @ self.Linv) / lam
        Linv[n, n] = 1 / lam
        self.Linv = Linv
        self.factored = n + 1

    def evidence(self, y: np.ndarray) -> float:
        """The log marginal likelihood of ``y`` under the last fit (how well this model, its
        coordinates included, explains the data), up to a constant."""
        while self.factored < len(self.points):
            self._extend()
        alpha = self.Linv @ y
        return float(-0.5 * alpha @ alpha + np.log(np.diag(self.Linv)).sum())

    def predict(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and sd of every candidate, given ``y`` at the points."""
        if self.V is None:
            self._spread()
        while self.factored < len(self.points):
            self._extend()
        n = len(self.points)
        return self.V[:, :n] @ (self.Linv @ y), np.sqrt(np.maximum(self.var, 1e-12))


class Bayes(Strategy):
    name = "bayes"
    ranges = {"initial": (0, None), **WARM_RANGES}

    def __init__(self, *args, initial: int = 2, warm_trials: int = 3, warm_points: int = 40,
                 warm_noise: float = 0.3, refit: float = 0.15, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial, self.refit = initial, refit
        self.index = {k: i for i, k in enumerate(self.candidates)}
        self.unmeasured = np.ones(len(self.candidates), dtype=bool)
        self.gp = GaussianProcess(coordinates(self.space, self.candidates))
        self.logs: list[float | None] = []  # log objective of each measured point (None: failed)
        self.warm_logs = self._seed(warm_points, warm_noise)
        self.fitted_at = 0  # points at the last fit
        self.queue = [self.index[k] for k in self.warm_first()[:warm_trials]]

    def _seed(self, count: int, noise: float) -> list[float]:
        """Put up to ``count`` warm configs into the model; returns their standardised log scores."""
        chosen = warm_points(self.warm, self.index, count, self.rng)
        for i in chosen:
            self.gp.add(i, noise)
        return list(chosen.values())

    def ask(self) -> tuple | None:
        if not self.unmeasured.any():
            return None
        self.queue = [i for i in self.queue if self.unmeasured[i]]
        if self.queue:
            return self.candidates[self.queue[0]]
        if len(self.logs) < self.initial or sum(v is not None for v in self.logs) < 2 \
                or self.gp.X.shape[1] == 0:
            free = np.flatnonzero(self.unmeasured)
            return self.candidates[int(free[self.rng.randrange(len(free))])]
        return self.candidates[self._propose()]

    def tell(self, key: tuple, objective: float | None) -> None:
        i = self.index.get(key)
        if i is not None and self.unmeasured[i]:
            self.unmeasured[i] = False
            self.gp.add(i)
            self.logs.append(math.log(objective) if objective is not None else None)

    def _propose(self) -> int:
        """The unmeasured candidate of the largest expected improvement."""
        ran = np.array([v for v in self.logs if v is not None])
        measured = np.array([ran.max() if v is None else v for v in self.logs])
        mean, sd = ran.mean(), max(ran.std(), 1e-9)
        y = np.concatenate([self.warm_logs, (measured - mean) / sd])
        if refit_due(self.fitted_at, len(y), self.refit):
            self.gp.fit(y)
            self.fitted_at = len(y)
        mu, sd_post = self.gp.predict(y)
        free = np.flatnonzero(self.unmeasured)
        score = log_expected_improvement(mu[free], sd_post[free], (ran.min() - mean) / sd)
        return int(free[np.argmax(score)])
