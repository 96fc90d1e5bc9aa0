"""Network building blocks, one file per architecture.

Every encoder is called as ``encoder(obs, task, task_encoding)`` and every trunk as
``trunk(x, task, task_encoding)``, where ``task`` is the int64 task index of each row and
``task_encoding`` the task encoder's output (or ``None``). Blocks that ignore an argument accept
it anyway, so the agent composes any encoder with any trunk.
"""
