"""The agent and what it is made of: one training step in one place.

``sac.py`` is the multi-task SAC agent and its one update (:meth:`~ptsl.core.agent.sac.
MultiTaskSAC.update`); ``buffer.py`` its replay buffer; ``optim.py`` its optimiser (torch's Adam
without torch.compile's import); ``builders.py`` each method's networks, under the method's name
in the registry (:mod:`ptsl.core.methods`, which imports nothing from here); ``nets/`` the network
building blocks, one file per architecture. The training loop (:mod:`ptsl.core.loop`) and the
CUDA graph's static update (:mod:`ptsl.core.cuda`) run this agent; they do not change its maths.
"""
