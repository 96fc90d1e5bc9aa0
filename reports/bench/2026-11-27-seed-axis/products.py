"""Probe: torch's batched products over a seed axis (vmap of F.linear, baddbmm, bmm for both
gradients) against one product per seed, bit for bit, one thread, at shapes of the study's
MT-SAC (width 163, batch 128 and 1280) including the Q head's single output."""
import torch
from torch.func import vmap
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
for S,B,i,o in [(2,128,163,1),(2,128,163,8),(2,128,43,163),(2,1280,163,1),(2,128,1,163)]:
    X = torch.randn(S,B,i,generator=g); W = torch.randn(S,o,i,generator=g)*.1; b = torch.randn(S,o,generator=g)
    per = torch.stack([torch.nn.functional.linear(X[s],W[s],b[s]) for s in range(S)])
    print((S,B,i,o), "vmap", torch.equal(vmap(torch.nn.functional.linear)(X,W,b), per),
          "baddbmm", torch.equal(torch.baddbmm(b.unsqueeze(1), X, W.transpose(1,2)), per))
    G = torch.randn(S,B,o,generator=g)
    print("   dX bmm", torch.equal(torch.bmm(G,W), torch.stack([G[s]@W[s] for s in range(S)])),
          "dW bmm", torch.equal(torch.bmm(G.transpose(1,2),X), torch.stack([G[s].t()@X[s] for s in range(S)])))
