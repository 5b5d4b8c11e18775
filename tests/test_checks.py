"""Every exercise check passes a correct answer and fails the stub, the lib's own solution and plausible mistakes.

The correct answers here are written differently from both the lib and the chapters' solutions (loops rather
than broadcasting), so they test the checks rather than repeat them.
"""

import importlib
import inspect
import math
import subprocess
import sys

import pytest
import torch

from minformers import bpe, checks, generation, masks, positions


def loop_local_global_mask(t, window, global_positions):
    mask = torch.zeros(t, t, dtype=torch.bool)
    for query in range(t):
        for key in range(t):
            near = abs(query - key) <= window
            mask[query, key] = near or query in global_positions or key in global_positions
    return mask


def loop_sinusoidal_positions(length, d_model):
    table = torch.zeros(length, d_model)
    for position in range(length):
        for pair in range(d_model // 2):
            angle = position / 10000 ** (2 * pair / d_model)
            table[position, 2 * pair] = math.sin(angle)
            table[position, 2 * pair + 1] = math.cos(angle)
    return table


def loop_merge_pair(ids, pair, new_id):
    out = list(ids)
    position = 0
    while position < len(out) - 1:
        if (out[position], out[position + 1]) == tuple(pair):
            out[position : position + 2] = [new_id]
        position += 1
    return out


# Plausible wrong answers a learner might write.
def merge_first_only(ids, pair, new_id):  # stops after the first occurrence
    for position in range(len(ids) - 1):
        if (ids[position], ids[position + 1]) == pair:
            return ids[:position] + [new_id] + ids[position + 2 :]
    return list(ids)


def merge_from_the_right(ids, pair, new_id):  # [7, 7, 7] -> [7, 8] instead of [8, 7]
    return loop_merge_pair(ids[::-1], pair[::-1], new_id)[::-1]


def merge_returns_tuple(ids, pair, new_id):
    return tuple(loop_merge_pair(ids, pair, new_id))


def stub_merge(ids, pair, new_id):
    raise NotImplementedError("scan left to right; on a match emit new_id and skip two")


def calls_lib_merge(ids, pair, new_id):
    return bpe.merge_pair(ids, pair, new_id)


def globals_only_as_keys(t, window, global_positions):  # forgets that global tokens also attend everywhere
    mask = loop_local_global_mask(t, window, [])
    mask[:, list(global_positions)] = True
    return mask


def causal_window(t, window, global_positions):  # uses a causal window where Longformer's is two-sided
    return loop_local_global_mask(t, window, global_positions) & torch.ones(t, t, dtype=torch.bool).tril()


def float_mask(t, window, global_positions):
    return loop_local_global_mask(t, window, global_positions).float()


def sin_cos_swapped(length, d_model):
    table = loop_sinusoidal_positions(length, d_model)
    return table[:, [i ^ 1 for i in range(d_model)]]  # swaps each (sin, cos) pair


def halves_not_interleaved(length, d_model):  # all sines, then all cosines
    table = loop_sinusoidal_positions(length, d_model)
    return torch.cat([table[:, 0::2], table[:, 1::2]], dim=1)


def exponent_without_two(length, d_model):  # 10000^(i/d) instead of 10000^(2i/d)
    return loop_sinusoidal_positions(length, 2 * d_model)[:, :d_model]


def stub_mask(t, window, global_positions):
    raise NotImplementedError("True within `window` of the diagonal, and on the rows and columns of global tokens")


def stub_positions(length, d_model):
    raise NotImplementedError("sin on even channels, cos on odd ones")


def calls_lib_mask(t, window, global_positions):
    return masks.local_global_mask(t, window, global_positions)


def builds_from_lib_window(t, window, global_positions):  # half the job done by the lib's sliding window
    mask = masks.sliding_window_mask(t, window, causal=False)
    mask[list(global_positions), :] = True
    mask[:, list(global_positions)] = True
    return mask


def calls_lib_positions(length, d_model):
    return positions.sinusoidal_positions(length, d_model)


def reads_lib_module(length, d_model):
    return positions.SinusoidalPositions(length, d_model)(length)


def bernoulli_masking(ids, vocab_size, mask_id, special_ids, p, generator, split=(0.8, 0.1, 0.1), skip=True):
    chosen = torch.rand(ids.shape, generator=generator) < p
    if skip:
        chosen &= ~torch.isin(ids, torch.tensor(special_ids))
    kind = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(max(special_ids) + 1, vocab_size, ids.shape, generator=generator)
    masked = ids.clone()
    masked[chosen & (kind < split[0])] = mask_id
    randomise = chosen & (kind >= split[0]) & (kind < split[0] + split[1])
    masked[randomise] = random_ids[randomise]
    return masked, torch.where(chosen, ids, torch.full_like(ids, -100))


def mask_everything_chosen(ids, vocab_size, mask_id, special_ids, p, generator):  # 15%, but no 80/10/10
    return bernoulli_masking(ids, vocab_size, mask_id, special_ids, p, generator, split=(1.0, 0.0, 0.0))


def masks_specials_too(ids, vocab_size, mask_id, special_ids, p, generator):
    return bernoulli_masking(ids, vocab_size, mask_id, special_ids, p, generator, skip=False)


def labels_everywhere(ids, vocab_size, mask_id, special_ids, p, generator):
    masked, _ = bernoulli_masking(ids, vocab_size, mask_id, special_ids, p, generator)
    return masked, ids.clone()


def stub_masking(ids, vocab_size, mask_id, special_ids, p, generator):
    raise NotImplementedError("choose with probability p, then 80% [MASK], 10% random, 10% unchanged")


def calls_lib_masking(ids, vocab_size, mask_id, special_ids, p, generator):
    from minformers.objectives import mask_tokens

    return mask_tokens(ids, vocab_size, mask_id, special_ids, p, generator=generator)


def explicit_mean_pool(hidden, attention_mask):
    rows = []
    for row in range(hidden.shape[0]):
        real = [hidden[row, t] for t in range(hidden.shape[1]) if attention_mask[row, t]]
        rows.append(torch.stack(real).mean(dim=0))
    return torch.stack(rows)


def mean_over_padding_too(hidden, attention_mask):  # forgets the mask
    return hidden.mean(dim=1)


def stub_mean_pool(hidden, attention_mask):
    raise NotImplementedError("sum the real tokens' vectors, divide by how many there are")


def calls_lib_mean_pool(hidden, attention_mask):
    from minformers.similarity import mean_pool

    return mean_pool(hidden, attention_mask)


def loop_text_lm_loss(lm_logits, input_ids, lengths):
    losses = []
    for row in range(len(input_ids)):
        for target in range(1, int(lengths[row]) - 1):  # the text pieces; the extract token is at length - 1
            log_probabilities = torch.log_softmax(lm_logits[row, target - 1], dim=-1)
            losses.append(-log_probabilities[input_ids[row, target]])
    return torch.stack(losses).mean()


def lm_loss_with_extract_token(lm_logits, input_ids, lengths):  # predicts the extract token too
    targets = input_ids[:, 1:].clone()
    targets[torch.arange(1, input_ids.shape[1]) >= lengths[:, None]] = -100
    return torch.nn.functional.cross_entropy(lm_logits[:, :-1].flatten(0, 1), targets.flatten(), ignore_index=-100)


def lm_loss_over_padding(lm_logits, input_ids, lengths):  # forgets the lengths
    return torch.nn.functional.cross_entropy(lm_logits[:, :-1].flatten(0, 1), input_ids[:, 1:].flatten())


def stub_text_lm_loss(lm_logits, input_ids, lengths):
    raise NotImplementedError("shift by one, mark padding and the extract token as ignored, average the rest")


def ideal_accuracy_by_counting(n_examples, n_keys, n_values):
    right = sum(1.0 if key < n_examples else 1 / n_values for key in range(n_keys))  # keys 0..n-1 shown, say
    return right / n_keys


def ideal_accuracy_without_chance(n_examples, n_keys, n_values):  # forgets that a guess is sometimes right
    return n_examples / n_keys


def stub_ideal_accuracy(n_examples, n_keys, n_values):
    raise NotImplementedError("P(shown) * 1 + P(not shown) / n_values")


def loop_decoder_mask(lengths, t):
    mask = torch.zeros(len(lengths), 1, t, t, dtype=torch.bool)
    for row, length in enumerate(lengths.tolist()):
        for query in range(t):
            for key in range(min(query + 1, length)):
                mask[row, 0, query, key] = True
    return mask


def decoder_mask_causal_only(lengths, t):  # forgets the padding
    return torch.ones(t, t, dtype=torch.bool).tril().expand(len(lengths), 1, t, t)


def stub_decoder_mask(lengths, t):
    raise NotImplementedError("causal (key <= query) AND key < length of the row")


def loop_sentinel_corruption(tokens, noise_mask, sentinels):
    inputs, targets, spans, previous = [], [], 0, False
    for token, noise in zip(tokens, noise_mask, strict=True):
        if noise and not previous:
            inputs.append(sentinels[spans])
            targets.append(sentinels[spans])
            spans += 1
        (targets if noise else inputs).append(token)
        previous = noise
    targets.append(sentinels[spans])
    return inputs, targets


def sentinel_per_token(tokens, noise_mask, sentinels):  # one sentinel per noise token, not per span
    inputs, targets, used = [], [], 0
    for token, noise in zip(tokens, noise_mask, strict=True):
        if noise:
            inputs.append(sentinels[used])
            targets += [sentinels[used], token]
            used += 1
        else:
            inputs.append(token)
    return inputs, targets + [sentinels[used]]


def stub_sentinel_corruption(tokens, noise_mask, sentinels):
    raise NotImplementedError("a sentinel per run of noise, in the inputs and before its tokens in the targets")


def embedding_parameters_by_parts(vocab_size, d_model, embedding_size):
    return sum((vocab_size * embedding_size, embedding_size * d_model, d_model))


def embedding_parameters_without_bias(vocab_size, d_model, embedding_size):
    return vocab_size * embedding_size + embedding_size * d_model


def stub_embedding_parameters(vocab_size, d_model, embedding_size):
    raise NotImplementedError("V x E, plus the projection's E x H weight and H bias")


def blocks_by_loop(documents, length, cls_id, sep_id):
    blocks = []
    for document in documents:
        current = []
        for sentence in document:
            for token in sentence:
                current.append(token)
                if len(current) == length - 2:
                    blocks.append([cls_id, *current, sep_id])
                    current = []
        if current:
            blocks.append([cls_id, *current, sep_id])
    return blocks


def blocks_across_documents(documents, length, cls_id, sep_id):  # one stream for the whole corpus
    stream = [token for document in documents for sentence in document for token in sentence]
    return [[cls_id, *stream[i : i + length - 2], sep_id] for i in range(0, len(stream), length - 2)]


def stub_blocks(documents, length, cls_id, sep_id):
    raise NotImplementedError("join each document's sentences, cut into pieces of length - 2, wrap in [CLS] ... [SEP]")


def replaced_tokens_by_loop(original_ids, mlm_labels, sampled):
    corrupted = original_ids.clone()
    samples = iter(sampled.tolist())
    for row in range(original_ids.shape[0]):
        for column in range(original_ids.shape[1]):
            if mlm_labels[row, column] != -100:
                corrupted[row, column] = next(samples)
    return corrupted, (corrupted != original_ids).float()


def replaced_means_masked(original_ids, mlm_labels, sampled):  # labels every masked position 1, even if unchanged
    corrupted = original_ids.clone()
    corrupted[mlm_labels != -100] = sampled
    return corrupted, (mlm_labels != -100).float()


def stub_replaced_tokens(original_ids, mlm_labels, sampled):
    raise NotImplementedError("put the samples at the labelled positions; label 1 where the token changed")


def compute_optimal_by_lagrange(E, A, alpha, B, beta, compute):
    # At the optimum alpha A / N^alpha = beta B / D^beta (the two marginal losses balance); with D = C / 6N that is
    # one equation in N, solved in logs.
    log_n = (math.log(alpha * A / (beta * B)) + beta * math.log(compute / 6)) / (alpha + beta)
    return math.exp(log_n), compute / 6 / math.exp(log_n)


def compute_optimal_even_split(E, A, alpha, B, beta, compute):  # N = D = sqrt(C / 6), whatever the law says
    return math.sqrt(compute / 6), math.sqrt(compute / 6)


def stub_compute_optimal(E, A, alpha, B, beta, compute):
    raise NotImplementedError("balance the two marginal losses under 6ND = C")


def swish_derivative_by_loop(x, beta):
    out = torch.empty_like(x)
    for index, value in enumerate(x.flatten().tolist()):
        s = 1 / (1 + math.exp(-beta * value)) if beta * value > -700 else 0.0
        out.view(-1)[index] = s + beta * value * s * (1 - s)
    return out


def swish_derivative_as_often_printed(x, beta):  # f + σ(x)(1 - f): right only for β = 1
    f = x * torch.sigmoid(beta * x)
    return f + torch.sigmoid(x) * (1 - f)


def swish_derivative_without_inner_beta(x, beta):  # forgets the chain rule's β in the second term
    s = torch.sigmoid(beta * x)
    return s + x * s * (1 - s)


def swish_derivative_by_autograd(x, beta):
    x = x.clone().requires_grad_(True)
    return torch.autograd.grad((x * torch.sigmoid(beta * x)).sum(), x)[0]


def stub_swish_derivative(x, beta):
    raise NotImplementedError("product rule on x times sigma(beta x), with sigma' = sigma (1 - sigma)")


def adamw_step_by_loop(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, weight_decay):
    results = [torch.empty_like(theta) for _ in range(3)]
    for index in range(theta.numel()):
        g = grad.view(-1)[index].item()
        m = betas[0] * exp_avg.view(-1)[index].item() + (1 - betas[0]) * g
        v = betas[1] * exp_avg_sq.view(-1)[index].item() + (1 - betas[1]) * g * g
        shrunk = theta.view(-1)[index].item() * (1 - lr * weight_decay)
        step = lr * (m / (1 - betas[0] ** t)) / (math.sqrt(v / (1 - betas[1] ** t)) + eps)
        for result, value in zip(results, (shrunk - step, m, v), strict=True):
            result.view(-1)[index] = value
    return tuple(results)


def adamw_without_bias_correction(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, weight_decay):
    m = betas[0] * exp_avg + (1 - betas[0]) * grad
    v = betas[1] * exp_avg_sq + (1 - betas[1]) * grad**2
    return theta * (1 - lr * weight_decay) - lr * m / (v.sqrt() + eps), m, v


def adamw_as_l2(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, weight_decay):  # Adam's L2, not decoupled
    return adamw_step_by_loop(theta, grad + weight_decay * theta, exp_avg, exp_avg_sq, t, lr, betas, eps, 0.0)


def adamw_decay_after_step(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, weight_decay):
    stepped, m, v = adamw_step_by_loop(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, 0.0)
    return stepped * (1 - lr * weight_decay), m, v


def adamw_eps_inside_root(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, weight_decay):
    m = betas[0] * exp_avg + (1 - betas[0]) * grad
    v = betas[1] * exp_avg_sq + (1 - betas[1]) * grad**2
    update = (m / (1 - betas[0] ** t)) / (v / (1 - betas[1] ** t) + eps).sqrt()
    return theta * (1 - lr * weight_decay) - lr * update, m, v


def adamw_by_torch(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, weight_decay):
    param = theta.clone().requires_grad_(True)
    optimizer = torch.optim.AdamW([param], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    param.grad = grad.clone()
    optimizer.step()
    return param.detach(), exp_avg, exp_avg_sq


def stub_adamw_step(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, weight_decay):
    raise NotImplementedError("decay theta, update both moments, bias-correct them, then step")


def chunked_attention_by_logsumexp(q, k, v, chunk_size):
    scale = q.shape[-1] ** -0.5
    total, out = None, None
    for start in range(0, k.shape[-2], chunk_size):
        scores = q @ k[..., start : start + chunk_size, :].transpose(-2, -1) * scale
        part_total = torch.logsumexp(scores, dim=-1, keepdim=True)
        part = torch.softmax(scores, dim=-1) @ v[..., start : start + chunk_size, :]
        if out is None:
            total, out = part_total, part
            continue
        merged = torch.logaddexp(total, part_total)
        out = out * (total - merged).exp() + part * (part_total - merged).exp()
        total = merged
    return out


def attention_with_the_whole_score_matrix(q, k, v, chunk_size):  # right values, quadratic memory
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def chunked_attention_without_max(q, k, v, chunk_size):  # exp of raw scores overflows for large ones
    numerator, denominator = 0, 0
    for start in range(0, k.shape[-2], chunk_size):
        weights = (q @ k[..., start : start + chunk_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])).exp()
        numerator = numerator + weights @ v[..., start : start + chunk_size, :]
        denominator = denominator + weights.sum(-1, keepdim=True)
    return numerator / denominator


def mean_of_chunk_softmaxes(q, k, v, chunk_size):  # each chunk normalised on its own, then averaged
    parts = [torch.softmax(q @ k[..., s : s + chunk_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
             @ v[..., s : s + chunk_size, :] for s in range(0, k.shape[-2], chunk_size)]
    return sum(parts) / len(parts)


def chunked_attention_by_torch(q, k, v, chunk_size):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def stub_chunked_attention(q, k, v, chunk_size):
    raise NotImplementedError("per chunk of keys: new running max, rescale the sum and output, add the chunk")


def stashed_by_counting(events):
    peaks = []
    for stage in range(max(e[0] for e in events) + 1):
        mine = [e for e in events if e[0] == stage]
        forwards = [e[3] for e in mine if e[1] == "F"]
        backwards_done = [e[4] for e in mine if e[1] == "B"]
        peaks.append(max(sum(s <= t for s in forwards) - sum(b <= t for b in backwards_done) for t in forwards))
    return peaks


def stashed_over_all_stages(events):  # one count for the whole pipeline, not per stage
    held = peak = 0
    for event in sorted(events, key=lambda e: e[3]):
        held += 1 if event[1] == "F" else -1
        peak = max(peak, held)
    return [peak] * (max(e[0] for e in events) + 1)


def stashed_in_given_order(events):  # forgets that the events may come in any order
    peaks = {}
    held = {}
    for stage, phase, *_ in events:
        held[stage] = held.get(stage, 0) + (1 if phase == "F" else -1)
        peaks[stage] = max(peaks.get(stage, 0), held[stage])
    return [peaks[stage] for stage in sorted(peaks)]


def stashed_counts_forwards(events):  # counts every forward, as if activations were never freed
    return [sum(e[0] == stage and e[1] == "F" for e in events) for stage in range(max(e[0] for e in events) + 1)]


def stub_stashed(events):
    raise NotImplementedError("per stage, in time order: +1 at a forward, -1 at a backward; keep the maximum")


def sgns_loss_pair_by_pair(center, context, negatives):
    total = 0.0
    for row in range(center.shape[0]):
        total = total + torch.nn.functional.softplus(-(center[row] @ context[row]))  # -log σ(x) = softplus(-x)
        for noise in negatives[row]:
            total = total + torch.nn.functional.softplus(noise @ center[row])
    return total / center.shape[0]


def stub_sgns_loss(center, context, negatives):
    raise NotImplementedError("score u·v for the true context and each negative; use logsigmoid")


def sgns_loss_naive_log(center, context, negatives):  # log(sigmoid(x)) underflows to -inf for very negative x
    positive = (center * context).sum(-1)
    negative = (negatives * center[:, None]).sum(-1)
    return (-torch.log(torch.sigmoid(positive)) - torch.log(torch.sigmoid(-negative)).sum(-1)).mean()


def sgns_loss_summed_over_batch(center, context, negatives):
    return sgns_loss_pair_by_pair(center, context, negatives) * center.shape[0]


def sgns_loss_negatives_unsigned(center, context, negatives):  # pushes negatives' scores up, not down
    positive = torch.nn.functional.logsigmoid((center * context).sum(-1))
    negative = torch.nn.functional.logsigmoid((negatives * center[:, None]).sum(-1)).sum(-1)
    return -(positive + negative).mean()


def calls_lib_sgns_loss(center, context, negatives):
    from minformers.word2vec import sgns_loss

    return sgns_loss(center, context, negatives)


def exposure_by_sorting(true_score, candidate_scores):
    # Flag -1 sorts the secret after the candidates it ties with, in descending order.
    ordered = sorted([(score, 0) for score in candidate_scores.tolist()] + [(true_score, -1)], reverse=True)
    rank = next(place for place, (_, flag) in enumerate(ordered, start=1) if flag == -1)
    return math.log2(len(ordered) / rank)


def exposure_ties_in_favour(true_score, candidate_scores):  # counts only strictly higher candidates
    rank = 1 + int((candidate_scores > true_score).sum())
    return math.log2(len(candidate_scores) + 1) - math.log2(rank)


def exposure_without_the_secret(true_score, candidate_scores):  # |R| = N, forgetting the secret is in the space
    rank = 1 + int((candidate_scores >= true_score).sum())
    return math.log2(len(candidate_scores)) - math.log2(rank)


def exposure_in_nats(true_score, candidate_scores):
    rank = 1 + int((candidate_scores >= true_score).sum())
    return math.log((len(candidate_scores) + 1) / rank)


def stub_exposure(true_score, candidate_scores):
    raise NotImplementedError("rank = 1 + candidates scoring >= the secret; log2(N + 1) - log2(rank)")


def relative_distance_by_flattening(initial, final):
    names = list(initial)
    start = torch.cat([initial[name].flatten().double() for name in names])
    now = torch.cat([final[name].flatten().double() for name in names])
    return float(torch.linalg.vector_norm(now - start) / torch.linalg.vector_norm(start))


def relative_distance_mean_of_ratios(initial, final):  # weighs a 1-number tensor like a 100-number one
    ratios = [(final[name] - tensor).norm() / tensor.norm() for name, tensor in initial.items()]
    return float(sum(ratios) / len(ratios))


def relative_distance_absolute(initial, final):  # forgets to divide by ||theta_0||
    return math.sqrt(sum(float((final[name] - tensor).pow(2).sum()) for name, tensor in initial.items()))


def relative_distance_squared(initial, final):  # the ratio of squared norms, no square root
    moved = sum(float((final[name] - tensor).pow(2).sum()) for name, tensor in initial.items())
    return moved / sum(float(tensor.pow(2).sum()) for tensor in initial.values())


def relative_distance_over_final(initial, final):  # divides by ||theta||, the norm after training
    moved = sum(float((final[name] - tensor).pow(2).sum()) for name, tensor in initial.items())
    return math.sqrt(moved / sum(float(final[name].pow(2).sum()) for name in initial))


def relative_distance_over_all_of_final(initial, final):  # reads final's extra tensors too
    moved = sum(float((final[name] - initial.get(name, torch.zeros_like(final[name]))).pow(2).sum()) for name in final)
    return math.sqrt(moved / sum(float(tensor.pow(2).sum()) for tensor in initial.values()))


def calls_lib_relative_distance(initial, final):
    from minformers.recipes.transfer import weight_movement

    return weight_movement(initial, final)["all"]


def stub_relative_distance(initial, final):
    raise NotImplementedError("sqrt(sum of squared differences / sum of squared initial entries)")


def equal_compute_steps_by_half_up(flops_per_step, budget):
    steps = {}
    for name in flops_per_step:
        steps[name] = math.floor(budget / flops_per_step[name] + 0.5)
    return steps


def equal_compute_steps_floored(flops_per_step, budget):  # every run a little short of its share
    return {name: int(budget // cost) for name, cost in flops_per_step.items()}


def equal_compute_steps_ceiled(flops_per_step, budget):  # every run a little over
    return {name: math.ceil(budget / cost) for name, cost in flops_per_step.items()}


def equal_compute_steps_unrounded(flops_per_step, budget):  # fractional steps
    return {name: budget / cost for name, cost in flops_per_step.items()}


def equal_compute_steps_inverted(flops_per_step, budget):  # the dearer step gets more steps
    total = sum(flops_per_step.values())
    return {name: round(budget * cost / total**2) for name, cost in flops_per_step.items()}


def calls_lib_equal_compute_steps(flops_per_step, budget):
    from minformers.recipes.objective_comparison import equal_compute_steps

    return equal_compute_steps(flops_per_step, budget)


def stub_equal_compute_steps(flops_per_step, budget):
    raise NotImplementedError("round(budget / flops) for each name, as an int")


def true_token_share_by_cases(p, split, n_ordinary):
    # Sum over what a chosen token becomes: kept shows the truth always, a random draw one time in n_ordinary.
    shown_true = {"mask": 0.0, "random": 1 / n_ordinary, "keep": 1.0}
    return p * sum(share * shown_true[role] for role, share in zip(("mask", "random", "keep"), split, strict=True))


def true_token_share_keep_only(p, split, n_ordinary):  # forgets that a random draw can be the original
    return p * split[2]


def true_token_share_without_rate(p, split, n_ordinary):  # a share of the chosen tokens, not of all tokens
    return split[2] + split[1] / n_ordinary


def true_token_share_all_random(p, split, n_ordinary):  # counts every random replacement as showing the truth
    return p * (split[1] + split[2])


def calls_lib_true_token_share(p, split, n_ordinary):
    from minformers.recipes.bert_pretraining import masking_shares

    return masking_shares(p, split, n_ordinary)["shown the true token"]


def stub_true_token_share(p, split, n_ordinary):
    raise NotImplementedError("p times (keep share + random share / n_ordinary)")



def candidate_ranks_by_sorting(logits, candidate_ids, answer_ids):
    # Sort each row's candidates best first, the answer after those it ties with, and read off its place.
    rows = candidate_ids.expand(len(answer_ids), -1) if candidate_ids.dim() == 1 else candidate_ids
    ranks = []
    for row, candidates, answer in zip(logits.tolist(), rows.tolist(), answer_ids.tolist(), strict=True):
        ordered = sorted(candidates, key=lambda piece: (-row[piece], piece == answer))
        ranks.append(ordered.index(answer) + 1)
    return torch.tensor(ranks)


def candidate_ranks_ties_in_favour(logits, candidate_ids, answer_ids):  # counts only strictly higher candidates
    rows = candidate_ids.expand(len(answer_ids), -1) if candidate_ids.dim() == 1 else candidate_ids
    return 1 + (logits.gather(1, rows) > logits.gather(1, answer_ids[:, None])).sum(dim=1)


def candidate_ranks_from_zero(logits, candidate_ids, answer_ids):  # 0 for the first choice
    rows = candidate_ids.expand(len(answer_ids), -1) if candidate_ids.dim() == 1 else candidate_ids
    return (logits.gather(1, rows) >= logits.gather(1, answer_ids[:, None])).sum(dim=1) - 1


def candidate_ranks_over_vocabulary(logits, candidate_ids, answer_ids):  # forgets the candidates
    return (logits >= logits.gather(1, answer_ids[:, None])).sum(dim=1)


def candidate_ranks_lowest_first(logits, candidate_ids, answer_ids):  # ranks by ascending logit
    rows = candidate_ids.expand(len(answer_ids), -1) if candidate_ids.dim() == 1 else candidate_ids
    return (logits.gather(1, rows) <= logits.gather(1, answer_ids[:, None])).sum(dim=1)


def calls_lib_candidate_ranks(logits, candidate_ids, answer_ids):
    from minformers.recipes.cloze import candidate_ranks

    return candidate_ranks(logits, candidate_ids, answer_ids)


def stub_candidate_ranks(logits, candidate_ids, answer_ids):
    raise NotImplementedError("count the candidates whose logit is >= the answer's")


def bm25_scores_by_matrix(query, documents, k1, b):  # a term-by-document count matrix, all documents at once
    terms = sorted({term for document in documents for term in document} | set(query))
    counts = torch.tensor([[document.count(term) for document in documents] for term in terms], dtype=torch.float64)
    lengths = counts.sum(dim=0)
    n = (counts > 0).sum(dim=1).double()  # an int tensor would turn the idf below into float32
    idf = torch.log1p((len(documents) - n + 0.5) / (n + 0.5))
    denominator = counts + k1 * (1 - b + b * lengths / lengths.mean())
    saturated = torch.where(counts > 0, counts * (k1 + 1) / denominator, 0.0)  # k1 = 0 and f = 0 would be 0 / 0
    weights = torch.tensor([query.count(term) for term in terms], dtype=torch.float64)
    return ((weights * idf)[:, None] * saturated).sum(dim=0).tolist()


def bm25_classic_idf(query, documents, k1, b):  # ln((N - n + 0.5) / (n + 0.5)): negative for common words
    average = sum(map(len, documents)) / len(documents)
    scores = []
    for document in documents:
        total = 0.0
        for term in query:
            n, f = sum(term in other for other in documents), document.count(term)
            if f:
                idf = math.log((len(documents) - n + 0.5) / (n + 0.5))
                total += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(document) / average))
        scores.append(total)
    return scores


def bm25_distinct_query_terms(query, documents, k1, b):  # counts a repeated query word once
    return bm25_scores_by_matrix(sorted(set(query)), documents, k1, b)


def bm25_without_length_norm(query, documents, k1, b):  # forgets b: every document treated as average length
    return bm25_scores_by_matrix(query, documents, k1, 0.0)


def calls_lib_bm25(query, documents, k1, b):
    from minformers.retrieval import BM25

    return BM25(documents, k1=k1, b=b).scores(query).tolist()


def stub_bm25_scores(query, documents, k1, b):
    raise NotImplementedError("sum over query terms of idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len / avgdl))")


def next_token_targets_by_loop(input_ids, attention_mask):
    targets = torch.full(input_ids.shape, -100, dtype=torch.long)
    for row in range(input_ids.shape[0]):
        for t in range(input_ids.shape[1] - 1):
            if attention_mask[row, t] and attention_mask[row, t + 1]:
                targets[row, t] = input_ids[row, t + 1]
    return targets


def next_token_targets_shifted_right(input_ids, attention_mask):  # position t given token t - 1: the old token
    targets = torch.full_like(input_ids, -100)
    targets[:, 1:] = input_ids[:, :-1].masked_fill(~attention_mask[:, :-1].bool(), -100)
    return targets


def next_token_targets_right_padding_only(input_ids, attention_mask):  # checks only that token t + 1 is real
    targets = torch.full_like(input_ids, -100)
    targets[:, :-1] = input_ids[:, 1:].masked_fill(~attention_mask[:, 1:].bool(), -100)
    return targets


def next_token_targets_dropping_last(input_ids, attention_mask):  # (B, T - 1), as language_model_loss slices
    return next_token_targets_by_loop(input_ids, attention_mask)[:, :-1]


def next_token_targets_padding_as_pad_id(input_ids, attention_mask):  # 0 ([PAD]) where -100 belongs
    return next_token_targets_by_loop(input_ids, attention_mask).clamp(min=0)


def calls_lib_next_token_targets(input_ids, attention_mask):
    from minformers.recipes.next_word import next_token_targets

    return next_token_targets(input_ids, attention_mask)


def stub_next_token_targets(input_ids, attention_mask):
    raise NotImplementedError("targets[:, t] = input_ids[:, t + 1] where tokens t and t + 1 are real, else -100")


# BERT's sentence inputs, GPT's loss, top-p filtering and RMSNorm: written with loops over rows and positions.
def encode_sentences_by_loop(tokenizer, texts, max_len):
    special = tokenizer.special_ids
    rows = []
    for text in texts:
        pieces = tokenizer.encode(text)
        while len(pieces) > max_len - 2:
            pieces.pop()
        rows.append([special["cls"]] + pieces + [special["sep"]])
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), special["pad"])
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    for row, tokens in enumerate(rows):
        for position, token in enumerate(tokens):
            ids[row, position], attention_mask[row, position] = token, 1
    return ids, attention_mask


def encode_sentences_cut_after_sep(tokenizer, texts, max_len):  # cuts the framed row, so the [SEP] can go
    ids, attention_mask = encode_sentences_by_loop(tokenizer, texts, max_len + 2)
    return ids[:, :max_len], attention_mask[:, :max_len]


def encode_sentences_without_cls(tokenizer, texts, max_len):
    ids, attention_mask = encode_sentences_by_loop(tokenizer, texts, max_len)
    return ids[:, 1:], attention_mask[:, 1:]


def encode_sentences_padded_left(tokenizer, texts, max_len):
    ids, attention_mask = encode_sentences_by_loop(tokenizer, texts, max_len)
    shifts = attention_mask.shape[1] - attention_mask.sum(1)
    return (torch.stack([row.roll(int(shift)) for row, shift in zip(ids, shifts, strict=True)]),
            torch.stack([row.roll(int(shift)) for row, shift in zip(attention_mask, shifts, strict=True)]))


def stub_encode_sentences(tokenizer, texts, max_len):
    raise NotImplementedError("[CLS] + at most max_len - 2 pieces + [SEP], then right-pad")


def language_model_loss_by_loop(logits, input_ids):
    total, count = torch.zeros((), dtype=torch.float64), 0
    for row in range(logits.shape[0]):
        for position in range(logits.shape[1] - 1):
            scores = logits[row, position].double()
            target = input_ids[row, position + 1]
            total += torch.logsumexp(scores, dim=0) - scores[target]
            count += 1
    return (total / count).float()


def language_model_loss_unshifted(logits, input_ids):  # predicts the token it was given
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), input_ids.flatten())


def language_model_loss_naive_softmax(logits, input_ids):  # exp overflows on large logits
    probabilities = logits[:, :-1].exp() / logits[:, :-1].exp().sum(-1, keepdim=True)
    return -probabilities.gather(-1, input_ids[:, 1:, None]).log().mean()


def language_model_loss_summed(logits, input_ids):
    return language_model_loss_by_loop(logits, input_ids) * (input_ids.shape[0] * (input_ids.shape[1] - 1))


def stub_language_model_loss(logits, input_ids):
    raise NotImplementedError("cross-entropy of logits[:, :-1] against input_ids[:, 1:]")


def top_p_filter_by_loop(logits, p):
    out = torch.full_like(logits, float("-inf"))
    for row in range(logits.shape[0]):
        probabilities = logits[row].softmax(dim=-1).tolist()
        mass = 0.0
        for token in sorted(range(len(probabilities)), key=lambda index: -probabilities[index]):
            if mass >= p:
                break
            out[row, token] = logits[row, token]
            mass += probabilities[token]
    return out


def top_p_filter_keeping_up_to_p(logits, p):  # stops before the token that crosses p
    probabilities, order = logits.softmax(dim=-1).sort(dim=-1, descending=True)
    drop = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, order, probabilities.cumsum(dim=-1) > p)
    return logits.masked_fill(drop, float("-inf"))


def top_p_filter_in_sorted_order(logits, p):  # forgets to put the tokens back in vocabulary order
    return top_p_filter_by_loop(logits, p).sort(dim=-1, descending=True).values


def top_p_filter_by_lib(logits, p):
    return generation.filter_logits(logits, top_p=p)


def stub_top_p_filter(logits, p):
    raise NotImplementedError("sort, cumulative sum, drop what comes after the sum reaches p, unsort")


def rms_norm_by_loop(x, weight, eps):
    rows = x.reshape(-1, x.shape[-1])
    out = torch.empty_like(rows)
    for index, row in enumerate(rows):
        out[index] = row / math.sqrt(sum(value * value for value in row.tolist()) / len(row) + eps) * weight
    return out.reshape(x.shape)


def rms_norm_eps_outside_root(x, weight, eps):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight


def rms_norm_centred(x, weight, eps):  # LayerNorm without the bias: subtracts the mean first
    centred = x - x.mean(-1, keepdim=True)
    return centred / (centred.pow(2).mean(-1, keepdim=True) + eps).sqrt() * weight


def rms_norm_by_torch(x, weight, eps):
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)


def stub_rms_norm(x, weight, eps):
    raise NotImplementedError("x / sqrt(mean(x ** 2 over the last dim) + eps), times weight")


def response_mask_by_loop(prompt_lengths, lengths, T):
    mask = torch.zeros(len(lengths), T, dtype=torch.bool)
    for row, (start, end) in enumerate(zip(prompt_lengths.tolist(), lengths.tolist(), strict=True)):
        mask[row, start:end] = True
    return mask


def response_mask_with_padding(prompt_lengths, lengths, T):  # forgets where each example ends
    return torch.arange(T) >= prompt_lengths[:, None]


def response_mask_from_the_prompts_last_token(prompt_lengths, lengths, T):  # one position early
    positions = torch.arange(T)
    return (positions >= prompt_lengths[:, None] - 1) & (positions < lengths[:, None])


def response_mask_by_lib(prompt_lengths, lengths, T):
    from minformers.sft import response_mask

    return response_mask(prompt_lengths, lengths, T)


def stub_response_mask(prompt_lengths, lengths, T):
    raise NotImplementedError("True where prompt_length <= t < length, row by row")


def lora_merge_by_layer(weight, A, B, alpha, r):
    return weight + sum((alpha / r) * torch.outer(B[:, k], A[k]) for k in range(r))


def lora_merge_without_scale(weight, A, B, alpha, r):
    return weight + B @ A


def lora_merge_scaled_by_alpha(weight, A, B, alpha, r):
    return weight + alpha * B @ A


def lora_merge_by_lib(weight, A, B, alpha, r):
    from minformers.lora import LoRALinear

    layer = LoRALinear(torch.nn.Linear(weight.shape[1], weight.shape[0]), r=r, alpha=alpha)
    layer.A.data, layer.B.data, layer.base.weight.data = A, B, weight.clone()
    layer.merge()
    return layer.base.weight


def stub_lora_merge(weight, A, B, alpha, r):
    raise NotImplementedError("W0 plus the scaled product of B and A")


def dpo_loss_by_pair(pc, pr, rc, rr, beta):
    import math

    losses = [math.log1p(math.exp(-beta * ((a - c) - (b - d)))) for a, b, c, d in zip(pc, pr, rc, rr, strict=True)]
    return torch.tensor(sum(losses) / len(losses))


def dpo_loss_summed_over_the_batch(pc, pr, rc, rr, beta):
    return -torch.nn.functional.logsigmoid(beta * ((pc - rc) - (pr - rr))).sum()


def dpo_loss_with_beta_outside(pc, pr, rc, rr, beta):  # beta scales the loss, not the margin
    return -beta * torch.nn.functional.logsigmoid((pc - rc) - (pr - rr)).mean()


def dpo_loss_by_lib(pc, pr, rc, rr, beta):
    from minformers.preference import dpo_loss

    return dpo_loss(pc, pr, rc, rr, beta)


def stub_dpo_loss(pc, pr, rc, rr, beta):
    raise NotImplementedError("-log sigmoid(beta times the difference of the two log-ratios), averaged")


def group_advantages_by_loop(rewards, group_size):
    advantages = []
    for start in range(0, len(rewards), group_size):
        group = rewards[start : start + group_size].tolist()
        mean = sum(group) / len(group)
        std = (sum((r - mean) ** 2 for r in group) / (len(group) - 1)) ** 0.5
        advantages += [(r - mean) / (std + 1e-4) for r in group]
    return torch.tensor(advantages)


def group_advantages_population_std(rewards, group_size):  # divides by n, not n - 1
    groups = rewards.view(-1, group_size)
    return ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, unbiased=False, keepdim=True) + 1e-4)).flatten()


def group_advantages_over_the_batch(rewards, group_size):  # one mean and std for every answer
    return (rewards - rewards.mean()) / (rewards.std() + 1e-4)


def group_advantages_by_lib(rewards, group_size):
    from minformers.grpo import group_advantages

    return group_advantages(rewards, group_size)


def stub_group_advantages(rewards, group_size):
    raise NotImplementedError("each reward minus its group's mean, over the group's std + 1e-4")


def int8_rows_by_loop(weight):
    rows = []
    for row in weight.tolist():
        scale = max(abs(v) for v in row) / 127 or 1.0
        rows.append([round(v / scale) * scale for v in row])
    return torch.tensor(rows)


def int8_rows_one_scale(weight):  # one scale for the whole tensor
    scale = weight.abs().max() / 127
    return (weight / scale).round() * scale


def int8_rows_truncated(weight):  # drops the fraction instead of rounding
    scale = weight.abs().amax(1, keepdim=True) / 127
    return (weight / scale.clamp(min=1e-12)).trunc() * scale


def int8_rows_by_lib(weight):
    from minformers.quantization import absmax_int8

    return absmax_int8(weight, "channel").dequantize()


def stub_int8_rows(weight):
    raise NotImplementedError("each row over its largest magnitude / 127, rounded, times it")


def residual_by_loop(p, q):
    weights = [max(0.0, a - b) for a, b in zip(p.flatten().tolist(), q.expand_as(p).flatten().tolist(), strict=True)]
    weights = torch.tensor(weights).reshape(p.shape)
    return weights / weights.sum(-1, keepdim=True)


def residual_unnormalised(p, q):
    return (p - q).clamp(min=0)


def residual_without_clamp(p, q):  # negative weights where the draft over-proposes
    return (p - q) / (p - q).abs().sum(-1, keepdim=True)


def residual_by_lib(p, q):
    from minformers.speculative import residual

    return residual(p, q)


def stub_residual(p, q):
    raise NotImplementedError("max(0, p - q), divided by its sum over the last dimension")


CHECKS = {
    "residual": (checks.check_residual, residual_by_loop, stub_residual),
    "int8_rows": (checks.check_int8_rows, int8_rows_by_loop, stub_int8_rows),
    "group_advantages": (checks.check_group_advantages, group_advantages_by_loop, stub_group_advantages),
    "dpo_loss": (checks.check_dpo_loss, dpo_loss_by_pair, stub_dpo_loss),
    "lora_merge": (checks.check_lora_merge, lora_merge_by_layer, stub_lora_merge),
    "response_mask": (checks.check_response_mask, response_mask_by_loop, stub_response_mask),
    "local_global_mask": (checks.check_local_global_mask, loop_local_global_mask, stub_mask),
    "sinusoidal_positions": (checks.check_sinusoidal_positions, loop_sinusoidal_positions, stub_positions),
    "merge_pair": (checks.check_merge_pair, loop_merge_pair, stub_merge),
    "mlm_masking": (checks.check_mlm_masking, bernoulli_masking, stub_masking),
    "mean_pool": (checks.check_mean_pool, explicit_mean_pool, stub_mean_pool),
    "text_lm_loss": (checks.check_text_lm_loss, loop_text_lm_loss, stub_text_lm_loss),
    "ideal_accuracy": (checks.check_ideal_accuracy, ideal_accuracy_by_counting, stub_ideal_accuracy),
    "decoder_self_mask": (checks.check_decoder_self_mask, loop_decoder_mask, stub_decoder_mask),
    "sentinel_corruption": (checks.check_sentinel_corruption, loop_sentinel_corruption, stub_sentinel_corruption),
    "factorized_embedding": (checks.check_factorized_embedding_parameters, embedding_parameters_by_parts,
                             stub_embedding_parameters),
    "contiguous_blocks": (checks.check_contiguous_blocks, blocks_by_loop, stub_blocks),
    "replaced_token_labels": (checks.check_replaced_token_labels, replaced_tokens_by_loop, stub_replaced_tokens),
    "compute_optimal": (checks.check_compute_optimal, compute_optimal_by_lagrange, stub_compute_optimal),
    "swish_derivative": (checks.check_swish_derivative, swish_derivative_by_loop, stub_swish_derivative),
    "adamw_step": (checks.check_adamw_step, adamw_step_by_loop, stub_adamw_step),
    "chunked_attention": (checks.check_chunked_attention, chunked_attention_by_logsumexp, stub_chunked_attention),
    "peak_stashed_microbatches": (checks.check_peak_stashed_microbatches, stashed_by_counting, stub_stashed),
    "sgns_loss": (checks.check_sgns_loss, sgns_loss_pair_by_pair, stub_sgns_loss),
    "exposure": (checks.check_exposure, exposure_by_sorting, stub_exposure),
    "relative_distance": (checks.check_relative_distance, relative_distance_by_flattening, stub_relative_distance),
    "equal_compute_steps": (checks.check_equal_compute_steps, equal_compute_steps_by_half_up,
                            stub_equal_compute_steps),
    "true_token_share": (checks.check_true_token_share, true_token_share_by_cases, stub_true_token_share),
    "candidate_ranks": (checks.check_candidate_ranks, candidate_ranks_by_sorting, stub_candidate_ranks),
    "bm25_scores": (checks.check_bm25_scores, bm25_scores_by_matrix, stub_bm25_scores),
    "next_token_targets": (checks.check_next_token_targets, next_token_targets_by_loop, stub_next_token_targets),
    "encode_sentences": (checks.check_encode_sentences, encode_sentences_by_loop, stub_encode_sentences),
    "language_model_loss": (checks.check_language_model_loss, language_model_loss_by_loop, stub_language_model_loss),
    "top_p_filter": (checks.check_top_p_filter, top_p_filter_by_loop, stub_top_p_filter),
    "rms_norm": (checks.check_rms_norm, rms_norm_by_loop, stub_rms_norm),
}

WRONG = [
    (checks.check_local_global_mask, globals_only_as_keys, "values differ"),
    (checks.check_local_global_mask, causal_window, "values differ"),
    (checks.check_local_global_mask, float_mask, "expected dtype torch.bool"),
    (checks.check_sinusoidal_positions, sin_cos_swapped, "values differ"),
    (checks.check_sinusoidal_positions, halves_not_interleaved, "values differ"),
    (checks.check_sinusoidal_positions, exponent_without_two, "values differ"),
    (checks.check_local_global_mask, calls_lib_mask, "calls the library's own solution"),
    (checks.check_local_global_mask, builds_from_lib_window, "calls the library's own solution"),
    (checks.check_sinusoidal_positions, calls_lib_positions, "calls the library's own solution"),
    (checks.check_sinusoidal_positions, reads_lib_module, "calls the library's own solution"),
    (checks.check_merge_pair, merge_first_only, "values differ"),
    (checks.check_merge_pair, merge_from_the_right, "overlapping occurrences"),
    (checks.check_merge_pair, merge_returns_tuple, "expected a list, received tuple"),
    (checks.check_merge_pair, calls_lib_merge, "calls the library's own solution"),
    (checks.check_mlm_masking, mask_everything_chosen, r"replaced by \[MASK\]': expected a share of 0.800"),
    (checks.check_mlm_masking, masks_specials_too, "special tokens and padding are never chosen"),
    (checks.check_mlm_masking, labels_everywhere, "labels hold the original id where chosen|never chosen"),
    (checks.check_mlm_masking, calls_lib_masking, "calls the library's own solution"),
    (checks.check_mean_pool, mean_over_padding_too, "rows of lengths 5, 3 and 1"),
    (checks.check_mean_pool, calls_lib_mean_pool, "calls the library's own solution"),
    (checks.check_text_lm_loss, lm_loss_with_extract_token, "values differ"),
    (checks.check_text_lm_loss, lm_loss_over_padding, "values differ"),
    (checks.check_ideal_accuracy, ideal_accuracy_without_chance, "expected"),
    (checks.check_decoder_self_mask, decoder_mask_causal_only, "values differ"),
    (checks.check_sentinel_corruption, sentinel_per_token, "case 'one span in the middle'"),
    (checks.check_factorized_embedding_parameters, embedding_parameters_without_bias, "expected"),
    (checks.check_contiguous_blocks, blocks_across_documents, "case 'two documents never share a block'"),
    (checks.check_replaced_token_labels, replaced_means_masked, "case 'the sample equals the original'"),
    (checks.check_compute_optimal, compute_optimal_even_split, "case 'Hoffmann et al.'s fit"),
    (checks.check_swish_derivative, swish_derivative_as_often_printed, "case 'β = 2'"),
    (checks.check_swish_derivative, swish_derivative_without_inner_beta, "case 'β = 2"),
    (checks.check_swish_derivative, swish_derivative_by_autograd, "calls the library's own solution"),
    (checks.check_adamw_step, adamw_without_bias_correction, r"case 'the first update \(t = 1\), no weight decay'"),
    (checks.check_adamw_step, adamw_as_l2, "case 'the first update with weight decay 0.01'"),
    (checks.check_adamw_step, adamw_decay_after_step, "weight decay .*: result 0: values differ"),
    (checks.check_adamw_step, adamw_eps_inside_root, "result 0: values differ"),
    (checks.check_adamw_step, adamw_by_torch, "calls the library's own solution"),
    (checks.check_chunked_attention, attention_with_the_whole_score_matrix, "MiB of tensors at its peak"),
    (checks.check_chunked_attention, chunked_attention_without_max, "large scores.*received NaN"),
    (checks.check_chunked_attention, mean_of_chunk_softmaxes, "case 'chunk_size divides T_k.*values differ"),
    (checks.check_chunked_attention, chunked_attention_by_torch, "calls the library's own solution"),
    (checks.check_peak_stashed_microbatches, stashed_over_all_stages, "case 'GPipe, 2 stages"),
    (checks.check_peak_stashed_microbatches, stashed_in_given_order, "case '1F1B with the events in reverse order'"),
    (checks.check_peak_stashed_microbatches, stashed_counts_forwards, "case '1F1B, 2 stages"),
    (checks.check_sgns_loss, sgns_loss_naive_log, "case 'large scores"),
    (checks.check_sgns_loss, sgns_loss_summed_over_batch, "case 'all vectors zero"),
    (checks.check_sgns_loss, sgns_loss_negatives_unsigned, "case 'one pair, two negatives, by hand'"),
    (checks.check_sgns_loss, calls_lib_sgns_loss, "calls the library's own solution"),
    (checks.check_exposure, exposure_ties_in_favour, "case 'a tie counts against the secret'"),
    (checks.check_exposure, exposure_without_the_secret, "case 'ranked first of 8"),
    (checks.check_exposure, exposure_in_nats, "case 'ranked first of 8"),
    (checks.check_relative_distance, relative_distance_mean_of_ratios, "case 'two tensors"),
    (checks.check_relative_distance, relative_distance_absolute, "case 'one tensor, by hand"),
    (checks.check_relative_distance, relative_distance_squared, "case 'one tensor, by hand"),
    (checks.check_relative_distance, relative_distance_over_final, "case 'one tensor, by hand"),
    (checks.check_relative_distance, relative_distance_over_all_of_final, "case 'final holds an extra tensor"),
    (checks.check_relative_distance, calls_lib_relative_distance, "calls the library's own solution"),
    (checks.check_equal_compute_steps, equal_compute_steps_floored, "case 'this page's four objectives"),
    (checks.check_equal_compute_steps, equal_compute_steps_ceiled, "case 'two runs|case 'this page"),
    (checks.check_equal_compute_steps, equal_compute_steps_unrounded, "expected a int, received float"),
    (checks.check_equal_compute_steps, equal_compute_steps_inverted, "case 'two runs"),
    (checks.check_equal_compute_steps, calls_lib_equal_compute_steps, "calls the library's own solution"),
    (checks.check_true_token_share, true_token_share_keep_only, "case 'BERT: 15%"),
    (checks.check_true_token_share, true_token_share_without_rate, "case 'BERT: 15%"),
    (checks.check_true_token_share, true_token_share_all_random, "case 'BERT: 15%"),
    (checks.check_true_token_share, calls_lib_true_token_share, "calls the library's own solution"),
    (checks.check_candidate_ranks, candidate_ranks_ties_in_favour, "case 'a candidate tied with the answer"),
    (checks.check_candidate_ranks, candidate_ranks_from_zero, "case 'shared candidates, no ties'"),
    (checks.check_candidate_ranks, candidate_ranks_over_vocabulary, "case 'shared candidates, no ties'"),
    (checks.check_candidate_ranks, candidate_ranks_lowest_first, "case 'shared candidates, no ties'"),
    (checks.check_candidate_ranks, calls_lib_candidate_ranks, "calls the library's own solution"),
    (checks.check_bm25_scores, bm25_classic_idf, "case 'one word in 2 of 3 documents"),
    (checks.check_bm25_scores, bm25_distinct_query_terms, "case 'a repeated query word counts twice'"),
    (checks.check_bm25_scores, bm25_without_length_norm, "case 'one word in 2 of 3 documents"),
    (checks.check_bm25_scores, calls_lib_bm25, "calls the library's own solution"),
    (checks.check_next_token_targets, next_token_targets_shifted_right, "case 'one block, no padding'"),
    (checks.check_next_token_targets, next_token_targets_right_padding_only, "case 'left padding"),
    (checks.check_next_token_targets, next_token_targets_dropping_last, r"expected shape \(1, 5\)"),
    (checks.check_next_token_targets, next_token_targets_padding_as_pad_id, "case 'one block, no padding'"),
    (checks.check_next_token_targets, calls_lib_next_token_targets, "calls the library's own solution"),
    (checks.check_encode_sentences, encode_sentences_cut_after_sep, "case 'a sentence cut to max_len'"),
    (checks.check_encode_sentences, encode_sentences_without_cls, "case 'one short sentence'"),
    (checks.check_encode_sentences, encode_sentences_padded_left, "case 'two sentences of different lengths'"),
    (checks.check_language_model_loss, language_model_loss_unshifted, "case 'a uniform guess'|case 'random logits"),
    (checks.check_language_model_loss, language_model_loss_naive_softmax, "case 'large logits"),
    (checks.check_language_model_loss, language_model_loss_summed, "case 'a uniform guess'"),
    (checks.check_top_p_filter, top_p_filter_keeping_up_to_p, "case 'two tokens needed'"),
    (checks.check_top_p_filter, top_p_filter_in_sorted_order, "case 'p = 1 keeps everything'"),
    (checks.check_top_p_filter, top_p_filter_by_lib, "calls the library's own solution"),
    (checks.check_rms_norm, rms_norm_eps_outside_root, "case 'small values: eps, inside the square root"),
    (checks.check_rms_norm, rms_norm_centred, "case 'one vector, unit weight'"),
    (checks.check_rms_norm, rms_norm_by_torch, "calls the library's own solution"),
    (checks.check_response_mask, response_mask_with_padding, "case 'two examples, the second padded'"),
    (checks.check_response_mask, response_mask_from_the_prompts_last_token, "case 'one example, no padding'"),
    (checks.check_response_mask, response_mask_by_lib, "calls the library's own solution"),
    (checks.check_lora_merge, lora_merge_without_scale, "case '5 x 7, r = 2, alpha = 2.0'|case '4 x 6"),
    (checks.check_lora_merge, lora_merge_scaled_by_alpha, "case '5 x 7, r = 2, alpha = 2.0'"),
    (checks.check_lora_merge, lora_merge_by_lib, "calls the library's own solution"),
    (checks.check_dpo_loss, dpo_loss_summed_over_the_batch, "case 'a batch of 4, beta = 0.5'"),
    (checks.check_dpo_loss, dpo_loss_with_beta_outside, "case 'a batch of 1, beta = 0.1'"),
    (checks.check_dpo_loss, dpo_loss_by_lib, "calls the library's own solution"),
    (checks.check_group_advantages, group_advantages_population_std, "case 'one group of 4'"),
    (checks.check_group_advantages, group_advantages_over_the_batch, "case 'two groups of 3'"),
    (checks.check_group_advantages, group_advantages_by_lib, "calls the library's own solution"),
    (checks.check_int8_rows, int8_rows_one_scale, "case 'a row with one large weight among small ones'"),
    (checks.check_int8_rows, int8_rows_truncated, "case 'one row'"),
    (checks.check_int8_rows, int8_rows_by_lib, "calls the library's own solution"),
    (checks.check_residual, residual_unnormalised, "case 'one position'"),
    (checks.check_residual, residual_without_clamp, "case 'one position'"),
    (checks.check_residual, residual_by_lib, "calls the library's own solution"),
]


def test_every_check_has_a_correct_answer_a_stub_and_a_wrong_answer():
    """The tables above cover every check the book can call, each in the part PARTS says it is in."""
    listed = {name for names in checks.PARTS.values() for name in names}
    defined = {name for part in checks.PARTS for name, _ in inspect.getmembers(
        importlib.import_module(f"minformers.checks.{part}"), inspect.isfunction) if name.startswith("check_")}
    assert defined == listed
    assert {check.__name__ for check, _, _ in CHECKS.values()} == listed
    assert {check.__name__ for check, _, _ in WRONG} == listed


def test_a_part_is_imported_only_when_one_of_its_checks_is_used():
    script = ("import sys\nfrom minformers import checks\nchecks.check_merge_pair\n"
              "print(sorted(m for m in sys.modules if m.startswith('minformers.')))")
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "minformers.checks.foundations" in loaded
    assert "minformers.bert" not in loaded and "minformers.distributed" not in loaded
    assert "check_adamw_step" in dir(checks)
    with pytest.raises(AttributeError, match="no attribute 'check_typo'"):
        checks.check_typo  # noqa: B018


@pytest.mark.parametrize("name", CHECKS)
def test_check_passes_a_correct_answer(name, capsys):
    check, correct, _ = CHECKS[name]
    check(correct)
    assert capsys.readouterr().out.startswith("ok: ")


@pytest.mark.parametrize("name", CHECKS)
def test_a_correct_answer_passes_the_cases_a_grader_draws(name, monkeypatch, capsys):
    # The grader draws the random cases from a seed of its own (checks.SEED): a correct answer passes them all.
    check, correct, _ = CHECKS[name]
    for seed in (1, 2, 3, 2**31 - 1):
        monkeypatch.setattr(checks, "SEED", seed)
        check(correct)
    assert capsys.readouterr().out.count("ok: ") == 4


@pytest.mark.parametrize("name", CHECKS)
def test_check_fails_the_stub_and_shows_its_hint(name):
    check, _, stub = CHECKS[name]
    with pytest.raises(checks.CheckFailed, match="not attempted yet"):
        check(stub)


@pytest.mark.parametrize("check, wrong, reason", WRONG, ids=[w.__name__ for _, w, _ in WRONG])
def test_check_fails_a_wrong_answer_and_says_why(check, wrong, reason):
    with pytest.raises(checks.CheckFailed, match=reason):
        check(wrong)


def test_failure_message_names_case_expected_and_received():
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_local_global_mask(globals_only_as_keys)
    message = str(failure.value)
    assert "case 'one token, global'" not in message  # that case passes: the first failing one is named
    assert "case '[CLS] global, window 1'" in message
    assert "expected tensor of shape (5, 5)" in message and "received tensor of shape (5, 5)" in message


def test_failure_message_never_shows_reference_source():
    source = inspect.getsource(masks.local_global_mask) + inspect.getsource(masks.sliding_window_mask)
    code_lines = {line.strip() for line in source.splitlines() if len(line.strip()) > 15}
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_local_global_mask(causal_window)
    assert not any(line in str(failure.value) for line in code_lines)


def test_references_work_again_after_a_check():
    with pytest.raises(checks.CheckFailed):
        checks.check_sinusoidal_positions(reads_lib_module)
    with pytest.raises(checks.CheckFailed):
        checks.check_local_global_mask(builds_from_lib_window)
    torch.testing.assert_close(positions.sinusoidal_positions(3, 4), loop_sinusoidal_positions(3, 4))
    assert masks.local_global_mask(3, 1, []).equal(loop_local_global_mask(3, 1, []))
    assert positions.SinusoidalPositions(4, 4)(4).shape == (4, 4)
