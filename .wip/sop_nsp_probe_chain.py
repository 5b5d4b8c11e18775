import time, torch, random, sys
sys.path.insert(0, "/tmp/w"); from chain import ChainWorld as SentenceWorld
from minformers.bert import BertConfig, BertForPreTraining
from minformers.recipes.bert_pretraining import pretraining_batch, pretraining_losses
from minformers.train import TrainConfig, train

torch.manual_seed(0)
world = SentenceWorld(n_hours=int(sys.argv[4]), words=int(sys.argv[5]))
steps=int(sys.argv[1]); B=int(sys.argv[2]); lr=float(sys.argv[3])
def run(task, seed=0):
    torch.manual_seed(seed)
    model = BertForPreTraining(BertConfig.tiny(world.vocab_size, max_len=32, d_model=int(sys.argv[8]), d_ff=4*int(sys.argv[8]), n_heads=int(sys.argv[10])))
    def batch(step):
        return pretraining_batch(world, world.pairs(task, B, seed=seed*100000+step), torch.Generator().manual_seed(step))
    t=time.time()
    h = train(model, batch, (lambda m,b: (lambda d: {**d, 'loss': d['nsp_loss']})(pretraining_losses(m,b))) if sys.argv[9]=='only' else pretraining_losses, TrainConfig(steps=steps, lr=lr, warmup_steps=steps//10, eval_every=steps), progress=False)
    el=time.time()-t
    model.eval()
    res={}
    for ev in ("nsp","sop"):
        from minformers.objectives import pad
        ps=world.pairs(ev, 1000, seed=999)
        ids,att=pad([p.input_ids for p in ps],0); seg,_=pad([p.segment_ids for p in ps],0)
        from types import SimpleNamespace
        b=SimpleNamespace(input_ids=ids,segment_ids=seg,attention_mask=att,nsp_labels=torch.tensor([0 if p.is_next else 1 for p in ps]))
        with torch.no_grad():
            out = model(b.input_ids, b.segment_ids, b.attention_mask)
        res[ev]=round((out.nsp_logits.argmax(-1)==b.nsp_labels).float().mean().item(),3)
    a=h.train["nsp_accuracy"]; print([round(sum(a[i:i+100])/100,2) for i in range(0,len(a),100)])
    print(task, f"{el:.1f}s", "train mlm", round(h.train["mlm_loss"][-1],3), res, flush=True)
for seed in range(int(sys.argv[7])):
  for task in sys.argv[6].split(","): run(task, seed)
