"""A PyTorch training loop fed by Granary, checkpointing the model and the data together so
that a crashed or preempted run resumes exactly where its checkpoint stood.

    build/tools/granary datagen imagenet --out data/imagenet --images 2048 --files 8 --size 64
    build/tools/granary cluster --dir /tmp/granary-cluster        # prints the client flags
    PYTHONPATH=build/python python3 examples/python/train_resnet.py --dispatcher HOST:PORT \\
        --tls_ca ... --tls_cert ... --tls_key ... --data data/imagenet --checkpoint /tmp/ckpt.pt

Kill it (Ctrl-C, SIGKILL, a preemption) and run the same command again: it loads the last
checkpoint — model, optimizer and the dataset's state_dict() — and the epoch goes on right
after the last batch that checkpoint had trained on. Every --checkpoint_every steps it saves.
"""

import argparse
import os
import time

import torch
import torch.nn as nn

import granary
import granary.torch


def pipeline(data_dir, batch_size):
    """The ImageNet-style pipeline of examples/imagenet_resnet.json, built in Python."""
    return (granary.Dataset.tfrecord([os.path.join(data_dir, "*.tfrecord")], shuffle_splits=True)
            .shuffle(256)
            .map("parse_example", keys=["image/encoded", "image/class/label"],
                 dtypes=["bytes", "int64"], num_threads=2)
            .map("decode_jpeg", num_threads=2)
            .mark("decoded")
            .map("random_crop", fraction=0.875, num_threads=2)
            .map("random_flip")
            .map("normalize", mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225],
                 num_threads=2)
            .batch(batch_size)
            .prefetch(2))


def model(name, classes):
    if name == "resnet18":
        import torchvision  # Debian's python3-torchvision
        return torchvision.models.resnet18(num_classes=classes)
    # A small convolutional network: trains at a useful pace on a laptop's CPU.
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, classes))


def save(path, state):
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)  # a crash mid-save leaves the previous checkpoint whole


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dispatcher", required=True)
    parser.add_argument("--tls_ca")
    parser.add_argument("--tls_cert")
    parser.add_argument("--tls_key")
    parser.add_argument("--insecure", action="store_true")
    parser.add_argument("--data", required=True, help="directory of `granary datagen` TFRecords")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--checkpoint_every", type=int, default=20, help="steps")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--model", choices=["small", "resnet18"], default="small")
    parser.add_argument("--job_name", default="train-resnet")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max_steps", type=int, default=0,
                        help="stop after this many steps of this run (0: none), as a crash would")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    dataset = granary.torch.GranaryIterableDataset(
        pipeline(os.path.abspath(args.data), args.batch_size), dispatcher=args.dispatcher,
        job_name=args.job_name, seed=args.seed, tls_ca=args.tls_ca, tls_cert=args.tls_cert,
        tls_key=args.tls_key, insecure=args.insecure or None)
    net = model(args.model, args.classes)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    step = 0
    if os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        net.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        dataset.load_state_dict(saved["data"])
        step = saved["step"]
        print(f"resumed at step {step}: epoch {saved['data']['epoch']}", flush=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=0)
    loss_fn = nn.CrossEntropyLoss()
    steps_this_run = 0
    while dataset.state_dict()["epoch"] < args.epochs:
        epoch = dataset.state_dict()["epoch"]
        images_seen, start = 0, time.time()
        for batch in loader:
            images, labels = granary.torch.images_and_labels(batch)
            images = images.contiguous()  # NCHW in memory: a copy the convolutions want anyway
            loss = loss_fn(net(images), labels % args.classes)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            steps_this_run += 1
            images_seen += len(labels)
            if step % args.checkpoint_every == 0:
                save(args.checkpoint, {"model": net.state_dict(),
                                       "optimizer": optimizer.state_dict(),
                                       "data": dataset.state_dict(), "step": step})
                print(f"step {step}: loss {loss.item():.3f}, checkpoint saved", flush=True)
            if args.max_steps and steps_this_run >= args.max_steps:
                print(f"stopping after {steps_this_run} steps (--max_steps)", flush=True)
                return
        elapsed = time.time() - start
        print(f"epoch {epoch}: {images_seen} images in this run, "
              f"{images_seen / max(elapsed, 1e-9):.0f} images/s", flush=True)
    save(args.checkpoint, {"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                           "data": dataset.state_dict(), "step": step})
    print(f"done: {args.epochs} epochs, {step} steps", flush=True)


if __name__ == "__main__":
    main()
