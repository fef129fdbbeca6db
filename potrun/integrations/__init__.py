"""Trainer adapters: potrun's rewards under the signatures RL trainers call.

    potrun.integrations.verl       compute_score, compute_score_batched, acompute_score (verl)
    potrun.integrations.openrlhf   reward_func, make_reward_func, reward_payload (OpenRLHF)
    potrun.rewards                 pot_reward, shaped_pot_reward, make_reward_function (TRL)

Each adapter is a thin translation of a trainer's call shape onto `potrun.rewards`, the one home of
the scoring: the same extraction, sandbox, comparators and reward scales, the same shared warm
sandbox (safe to call from any number of threads), and the same stripping of chat-template tokens
(`potrun.extractors.chat`). Nothing here imports a trainer, torch included.
"""
